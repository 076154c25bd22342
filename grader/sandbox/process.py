"""The process backend: a child python with an empty environment, rlimits, and (as root) its own uid."""
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

from .base import FrameCollector, Limits, Sandbox, SandboxRun
from .runner import check_reachable, runner_python
from .uids import lease_uid

LOG_TAIL = 20000


def _drop_and_limit(uid: int | None, limits: Limits):
    """preexec_fn: rlimits that torch tolerates, then the unprivileged uid (NPROC only binds non-root)."""
    def apply():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        fsize = limits.scratch_mb << 20
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.pids, limits.pids))
    return apply


def kill_uid(uid: int) -> None:
    """Kill every process of the sandbox uid, daemons that left our process group included."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)  # as that uid, -1 means every process it owns
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


class ProcessSandbox(Sandbox):
    """Runs the harness as a plain child process; hardened when the grader runs as root."""
    name = "process"

    def __init__(self, python: str | None = None):
        # As root, each run gets a uid of its own from a pool: never the grader's, never another run's.
        self.privileged = os.geteuid() == 0
        self.python = python or runner_python()
        if self.privileged:
            check_reachable(self.python)

    def run(self, job_dir: Path, limits: Limits, wall_s: float, on_frame=None) -> SandboxRun:
        """Run under a leased uid when root (so cleanup may kill all of that uid's processes)."""
        if not self.privileged:
            return self._run(None, job_dir, limits, wall_s, on_frame)
        with lease_uid() as uid:
            return self._run(uid, job_dir, limits, wall_s, on_frame)

    def _run(self, uid, job_dir: Path, limits: Limits, wall_s: float, on_frame) -> SandboxRun:
        """Start the harness, collect frames, enforce the wall clock, then kill whatever is left."""
        scratch = job_dir / "scratch"
        if uid is not None:
            os.chown(scratch, uid, uid)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "TMPDIR": str(scratch)}
        read_fd, write_fd = os.pipe()
        log_path = job_dir / "harness.log"
        started = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [self.python, "-I", str(job_dir / "harness" / "main.py"), str(job_dir), str(write_fd)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=scratch, pass_fds=(write_fd,),
                start_new_session=True, preexec_fn=_drop_and_limit(uid, limits))
        os.close(write_fd)
        clock = lambda: time.monotonic() - started  # noqa: E731
        collector = FrameCollector(os.fdopen(read_fd, "rb", buffering=0), limits.output_mb << 20, on_frame, clock).start()
        killed = None
        try:
            proc.wait(timeout=wall_s)
        except subprocess.TimeoutExpired:
            killed = f"the sandbox ran longer than its {wall_s:.0f} s budget and was killed"
        finally:
            self._cleanup(proc, uid)
        collector.join(timeout=10)
        if collector.error and not killed:
            killed = collector.error
        return SandboxRun(self.name, collector.frames, proc.returncode, killed, clock(), collector.hello_at,
                          log_path.read_bytes()[-LOG_TAIL:].decode("utf-8", "replace"))

    def _cleanup(self, proc, uid):
        """Kill the process group and, with a dedicated uid, every process that uid still has."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if uid is not None:
            kill_uid(uid)
        proc.wait()
