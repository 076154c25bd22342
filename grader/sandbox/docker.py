"""The docker backend: a fresh container per submission, removed whatever happens.

No network, a read-only root, a non-root user, no capabilities, no-new-privileges (and docker's
default seccomp profile), memory = memory + swap, a pids limit, a CPU quota, size-capped tmpfs for
scratch/ and /tmp, and a wall-clock kill. The job goes in with put_archive into an anonymous volume
(so the worker shares no host path with the container, and the root stays read-only); it is owned
by root and read-only for the sandbox user. Results come back on the container's stdout, which only
PID 1 (a non-dumpable init) and the non-dumpable harness hold: unlike a file in the container, no
process the student controls can write to it.
"""
import io
import os
import tarfile
import threading
import time
import uuid
from pathlib import Path

from .base import FrameCollector, Limits, Sandbox, SandboxRun

DEFAULT_IMAGE = "grader-runner:latest"
SANDBOX_UID = 10001  # the image's `sandbox` user
PYTHON = "/opt/venv/bin/python"
INIT = Path(__file__).with_name("sandbox_init.py")
LABEL = "grader.sandbox"
TMP_MB = 16
SHM_MB = 64
LOG_LIMIT = 1 << 20
LOG_TAIL = 20000


class SandboxUnavailable(RuntimeError):
    """The docker engine or the runner image is missing: an installation problem, never the student's."""


def client(timeout: float = 60):
    """A docker client from the environment (DOCKER_HOST or the local socket)."""
    try:
        import docker
    except ImportError as exc:
        raise SandboxUnavailable(f"the docker SDK is not installed: {exc}") from None
    try:
        return docker.from_env(timeout=timeout)
    except docker.errors.DockerException as exc:
        raise SandboxUnavailable(f"no docker engine answers: {exc}") from None


def engine_answers(timeout: float = 3.0) -> str | None:
    """None when an engine answers a ping, else why not."""
    try:
        c = client(timeout)
        try:
            c.ping()
        finally:
            c.close()
        return None
    except Exception as exc:  # the SDK raises several unrelated types for "not there"
        return f"no docker engine answers: {exc}"


def image_present(image: str = DEFAULT_IMAGE) -> str | None:
    """None when the runner image exists locally, else why not (with the fix)."""
    try:
        c = client(10)
        try:
            c.images.get(image)
        finally:
            c.close()
        return None
    except Exception as exc:
        return f"runner image {image} is not available ({exc}); build it with scripts/build-runner-image.sh"


def job_tar(job_dir: Path) -> bytes:
    """The job (harness, submission, inputs, job.json) and our init, owned by root, read-only for the sandbox user."""
    buf = io.BytesIO()

    def add(path: Path, arcname: str):
        info = tarfile.TarInfo(arcname)
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = int(time.time())
        if path.is_dir():
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        else:
            data = path.read_bytes()
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

    with tarfile.open(fileobj=buf, mode="w") as tar:
        for root, dirs, files in os.walk(job_dir):
            rel = Path(root).relative_to(job_dir)
            if rel.parts[:1] == ("scratch",):
                continue  # scratch is the container's own tmpfs
            dirs.sort()
            for name in sorted(dirs):
                if rel == Path(".") and name == "scratch":
                    continue
                add(Path(root) / name, str(rel / name))
            for name in sorted(files):
                add(Path(root) / name, str(rel / name))
        add(INIT, "init.py")
    return buf.getvalue()


class _Stdout:
    """File-like view of the attach stream's stdout for FrameCollector; stderr goes to a capped log."""

    def __init__(self, stream):
        self.stream, self.log, self.log_bytes = stream, bytearray(), 0

    def read(self, _n=-1) -> bytes:
        for out, err in self.stream:
            if err:
                self.log_bytes += len(err)
                if len(self.log) < LOG_LIMIT:
                    self.log += err[:LOG_LIMIT - len(self.log)]
            if out:
                return out
        return b""


def sweep_stale(api) -> list[str]:
    """Remove sandbox containers (and volumes) past their deadline: left by a worker that died mid-run."""
    removed = []
    try:
        stale = api.containers.list(all=True, filters={"label": LABEL})
    except Exception:
        return removed
    for container in stale:
        deadline = container.labels.get(f"{LABEL}.deadline", "")
        if deadline.isdigit() and int(deadline) < time.time():
            try:
                container.remove(force=True, v=True)
                removed.append(container.id[:12])
            except Exception:
                pass
    return removed


class DockerSandbox(Sandbox):
    """One container per run, through the docker SDK."""
    name = "docker"

    def __init__(self, image: str | None = None, python: str = PYTHON, uid: int = SANDBOX_UID):
        self.image = image or os.environ.get("GRADER_RUNNER_IMAGE", DEFAULT_IMAGE)
        self.python, self.uid = python, uid

    def container_config(self, limits: Limits, run_id: str, deadline: float = 0.0) -> dict:
        """Keyword arguments for containers.create: every limit of the run (deadline: epoch after which it is stale)."""
        from docker.types import LogConfig, Mount, Ulimit
        fsize = limits.scratch_mb << 20
        return dict(
            image=self.image,
            command=[self.python, "-I", "/job/init.py", "/job/harness/main.py", "/job"],
            user=f"{self.uid}:{self.uid}", working_dir="/job/scratch", hostname="sandbox",
            environment={"PATH": "/opt/venv/bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/job/scratch",
                         "TMPDIR": "/job/scratch", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m", pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9), shm_size=f"{SHM_MB}m", ipc_mode="private",
            mounts=[Mount("/job", None, type="volume")],
            tmpfs={"/job/scratch": f"rw,nosuid,nodev,noexec,size={limits.scratch_mb}m,uid={self.uid},gid={self.uid},mode=0700",
                   "/tmp": f"rw,nosuid,nodev,noexec,size={TMP_MB}m,mode=1777"},
            ulimits=[Ulimit(name="core", soft=0, hard=0), Ulimit(name="nofile", soft=limits.files, hard=limits.files),
                     Ulimit(name="fsize", soft=fsize, hard=fsize)],
            log_config=LogConfig(type="none"),
            labels={LABEL: "1", f"{LABEL}.run": run_id, f"{LABEL}.deadline": str(int(deadline))},
            stdin_open=False, tty=False, detach=True)

    def run(self, job_dir: Path, limits: Limits, wall_s: float, on_frame=None) -> SandboxRun:
        """Create, fill, start and watch the container; remove it (and its volume) whatever happens."""
        import docker
        import requests
        started = time.monotonic()
        clock = lambda: time.monotonic() - started  # noqa: E731
        run_id = uuid.uuid4().hex[:12]
        api = client(timeout=max(60.0, wall_s + 30))
        container = sock = collector = None
        killed = kind = None
        layers = {"image": self.image, "user": self.uid, "network": "none", "read_only_root": True,
                  "capabilities": "none", "seccomp": "docker default", "memory_mb": limits.memory_mb,
                  "pids": limits.pids, "cpus": limits.cpus, "scratch_mb": limits.scratch_mb}
        try:
            sweep_stale(api)
            try:
                container = api.containers.create(**self.container_config(limits, run_id, time.time() + wall_s + 120))
            except docker.errors.ImageNotFound:
                raise SandboxUnavailable(f"runner image {self.image} is missing; build it with "
                                         f"scripts/build-runner-image.sh") from None
            layers["container"] = container.id[:12]
            layers["volume"] = next((m.get("Name") for m in container.attrs.get("Mounts", [])
                                     if m.get("Type") == "volume"), None)
            if not container.put_archive("/job", job_tar(job_dir)):
                raise SandboxUnavailable("put_archive refused the job")
            # Attach before start so no byte of the channel is lost; stdout and stderr arrive apart.
            sock = api.api.attach(container.id, stdout=True, stderr=True, stream=True, logs=False, demux=True)
            stdout = _Stdout(sock)
            collector = FrameCollector(stdout, limits.output_mb << 20, on_frame, clock)
            container.start()
            collector.start()
            try:
                result = container.wait(timeout=wall_s)
                exit_code = result.get("StatusCode")
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                killed = f"the sandbox ran longer than its {wall_s:g} s budget and was killed"
                kind = "timeout"
                self._kill(container)
                exit_code = None
            collector.join(timeout=10)
            if collector.thread.is_alive():
                self._kill(container)
                collector.join(timeout=5)
            container.reload()
            state = container.attrs.get("State", {})
            if exit_code is None:
                exit_code = state.get("ExitCode")
            layers["oom_killed"] = bool(state.get("OOMKilled"))
            finished = any(h.get("type") == "done" for h, _ in collector.frames)
            if collector.error and not killed:
                killed = collector.error
                kind = "crash"
            if not killed and not finished and layers["oom_killed"]:
                killed = f"the sandbox ran out of memory (limit {limits.memory_mb} MiB) and was killed"
                kind = "oom"
            log = bytes(stdout.log[-LOG_TAIL:]).decode("utf-8", "replace")
            log += "\n[sandbox] " + ", ".join(f"{k}={v}" for k, v in layers.items()) + "\n"
            return SandboxRun(self.name, collector.frames, exit_code, killed, clock(), collector.hello_at, log,
                              layers=layers, ident=container.id, killed_kind=kind)
        finally:
            if sock is not None:
                try:
                    sock.close()
                except Exception:
                    pass
            if container is not None:
                self._remove(container)
            api.close()

    @staticmethod
    def _kill(container) -> None:
        try:
            container.kill()
        except Exception:
            pass  # already stopped

    @staticmethod
    def _remove(container) -> None:
        """Remove the container and its anonymous volume, retrying while the engine is busy with it."""
        import docker
        for attempt in range(5):
            try:
                container.remove(force=True, v=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError:
                time.sleep(0.2 * (attempt + 1))
        threading.Thread(target=lambda: DockerSandbox._remove_late(container), daemon=True).start()

    @staticmethod
    def _remove_late(container) -> None:
        time.sleep(5)
        try:
            container.remove(force=True, v=True)
        except Exception:
            pass
