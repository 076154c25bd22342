"""Helpers for the sandbox, isolation, integrity, attack and service tests: backend availability (never a silent
skip in CI), a recording sandbox, leftovers."""
import os
import time
from pathlib import Path

import pytest

from tests.ci import missing
from grader.harness.main import stat_fields
from grader.sandbox import Sandbox, make_sandbox
from grader.sandbox import docker as docker_backend
from grader.sandbox.process import uid_processes

BACKENDS = ("process", "docker")
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def docker_problem() -> str | None:
    """None when the docker backend can run here, else why not."""
    return docker_backend.engine_answers() or docker_backend.image_present()


def require_backend(backend: str) -> None:
    """Skip (locally) or fail (CI=true) when the backend cannot run: CI must test both for real."""
    if backend != "docker":
        return
    why = docker_problem()
    if why is None:
        return
    missing(f"the docker backend is unavailable: {why} (.ci/run starts the engine with scripts/start-dockerd.sh "
            f"and builds the image with scripts/build-runner-image.sh)")


def layer_missing(reason: str) -> None:
    """Skip locally when an isolation layer is not available; fail in CI, which installs every layer."""
    missing(reason)


def backend_params():
    """pytest params for both backends, docker marked."""
    return [pytest.param("process", id="process"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]


class Recorder(Sandbox):
    """A sandbox that remembers each job_dir and SandboxRun of the backend it wraps: run cold, or (ahead=True) started
    ahead of its job as a worker's and `grader check`'s are, its run returned at the done frame and torn down after."""

    def __init__(self, backend: str, ahead: bool = False, **config):
        self.inner = make_sandbox(backend, **config)
        self.name, self.ahead = self.inner.name, ahead
        self.runs, self.job_dirs, self.ended = [], [], []

    def run(self, job_dir, limits, wall_s, on_frame=None):
        """Delegate and record."""
        self.job_dirs.append(Path(job_dir))
        run = self.inner.run(job_dir, limits, wall_s, on_frame)
        self.runs.append(run)
        self.ended.append(boot_time_s())
        return run

    def prepare(self, limits):
        """Cold (the base class's, which calls run()), or the backend's own sandbox started ahead, recorded."""
        return RecordedAhead(self, self.inner.prepare(limits)) if self.ahead else super().prepare(limits)


class RecordedAhead:
    """A backend's sandbox started ahead, its run recorded; close() waits for the teardown the sandbox defers, so that
    the leftovers are looked for once it says nothing is left."""

    def __init__(self, recorder: Recorder, inner):
        self.recorder, self.inner, self.index = recorder, inner, None
        self.job_dir, self.limits = inner.job_dir, inner.limits

    def talk(self, on_ask) -> None:
        self.inner.talk(on_ask)

    def run(self, wall_s, on_frame=None):
        self.recorder.job_dirs.append(Path(self.job_dir))
        self.recorder.ended.append(None)  # filled in by close(): another run may be recorded meanwhile
        self.index = len(self.recorder.ended) - 1
        run = self.inner.run(wall_s, on_frame)
        self.recorder.runs.append(run)
        return run

    def close(self) -> None:
        self.inner.close()
        assert self.inner.closed.wait(60), "the sandbox's teardown did not end within 60 s"
        if self.index is not None:
            self.recorder.ended[self.index] = boot_time_s()


def boot_time_s() -> float:
    """Seconds since boot, the clock of /proc/PID/stat's start time."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def started_before(pid: int, moment: float) -> bool:
    """True when the process started before moment (seconds since boot)."""
    fields = stat_fields(pid)
    return fields is not None and int(fields[19]) / os.sysconf("SC_CLK_TCK") < moment


def leftovers(backend: str, run, job_dir: Path, ended: float | None = None) -> list[str]:
    """Everything a run left behind: processes, files, cgroups, containers, volumes, the job directory.

    The uid pool is shared with every concurrent grading on this host, so a uid's processes and files
    count only when they predate the end of the run (ended, seconds since boot; default now).
    """
    left = []
    ended = boot_time_s() if ended is None else ended
    if job_dir.exists():
        left.append(f"job directory {job_dir}")
    if backend == "process":
        uid = int(run.ident) if run.ident.isdigit() else None
        if uid is not None:
            left += [f"process {pid} of uid {uid}" for pid in uid_processes(uid) if started_before(pid, ended)]
            wall_ended = time.time() - (boot_time_s() - ended)
            for top in SHARED_TMP:
                try:
                    left += [f"file {e.path}" for e in os.scandir(top)
                             if e.stat(follow_symlinks=False).st_uid == uid and e.stat(follow_symlinks=False).st_ctime < wall_ended]
                except OSError:
                    pass
        for ctl in ("memory", "pids", "cpu", "grader-sandbox"):
            base = Path("/sys/fs/cgroup") / ctl / "grader-sandbox"
            if base.is_dir():
                left += [f"cgroup {d}" for d in base.glob(f"run-{os.getpid()}-*")]
        unified = Path("/sys/fs/cgroup/grader-sandbox")
        if unified.is_dir():
            left += [f"cgroup {d}" for d in unified.glob(f"run-{os.getpid()}-*")]
    else:
        left += docker_leftovers(run.ident, run.layers.get("volume"))
    return left


def docker_leftovers(container: str, volume: str | None) -> list[str]:
    """The container and its volume, if either is still on the engine."""
    import docker
    client = docker.from_env()
    left = []
    try:
        for kind, ident in (("container", container), ("volume", volume)):
            if not ident:
                continue
            try:
                (client.containers if kind == "container" else client.volumes).get(ident)
                left.append(f"{kind} {ident[:12]}")
            except docker.errors.NotFound:
                pass
    finally:
        client.close()
    return left


def forked(layers: dict) -> bool:
    """True when a run's record (SandboxRun.layers) says the fork server forked its sandbox."""
    return layers.get("started") == "forked by the fork server"


def alive(pid: int) -> bool:
    """Neither gone nor a zombie."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != b"Z"
