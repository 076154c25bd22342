"""The docker backend: a fresh container per submission, removed whatever happens.

No network, a read-only root, a non-root user, no capabilities, no-new-privileges (and docker's
default seccomp profile), memory = memory + swap, a pids limit, a CPU quota, size-capped tmpfs for
scratch/ and /tmp, and a wall-clock kill. The job goes in with put_archive into an anonymous volume
(so the worker shares no host path with the container, and the root stays read-only); it is owned
by root and read-only for the sandbox user. Results come back on the container's stdout, which only
PID 1 (a non-dumpable init) and the non-dumpable harness hold: unlike a file in the container, no
process the student controls can write to it.

prepare() starts the container ahead of its job (DockerStartedAhead): the harness imports torch and
waits on its stdin; run() copies the job in, then sends the go through the attach socket.
"""
import io
import os
import socket
import tarfile
import threading
import time
import uuid
from pathlib import Path

from ..harness import wire
from .cleanup import remove_tree
from .base import (HASH_SEED, PYTHON_FLAGS, FrameCollector, Limits, Prepared, Sandbox, SandboxRun, low_priority,
                   new_job_dir, wait_for_hello)

DEFAULT_IMAGE = "grader-runner:latest"
SANDBOX_UID = 10001  # the image's `sandbox` user
PYTHON = "/opt/venv/bin/python"
INIT = Path(__file__).with_name("sandbox_init.py")
LABEL = "grader.sandbox"
TMP_MB = 16
SHM_MB = 64
# A sandbox container of low priority (base.low_priority(): a worker's) yields the CPU to the web, the database and
# the workers (issue 19): a low cpu.shares (a nice-0 task is 1024; as the process backend's cgroup, about nice 19).
# It only matters when the CPU is contended.
CPU_SHARES = 16
LOG_LIMIT = 1 << 20
LOG_TAIL = 20000
# A run's deadline label is its wall budget plus this: past it, any worker's sweep may remove the container.
MARGIN_S = 120
# How long a container started ahead may wait for its job; its deadline label is fixed at create time.
IDLE_S = 30 * 60


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


def job_tar(job_dir: Path, job_only: bool = False) -> bytes:
    """The job (harness, submission, inputs, job.json) and our init, owned by root, read-only for the sandbox user.

    job_only: without the harness and init (in a container started ahead, they are in /job already).
    """
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
            if rel.parts[:1] == ("scratch",) or (job_only and rel.parts[:1] == ("harness",)):
                continue  # scratch is the container's own tmpfs
            dirs.sort()
            for name in sorted(dirs):
                if rel == Path(".") and (name == "scratch" or (job_only and name == "harness")):
                    continue
                add(Path(root) / name, str(rel / name))
            for name in sorted(files):
                add(Path(root) / name, str(rel / name))
        if not job_only:
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


def sweep_stale(api, now: float | None = None) -> list[str]:
    """Remove sandbox containers (and volumes) past their deadline: left by a worker that died mid-run or while waiting."""
    removed = []
    try:
        stale = api.containers.list(all=True, filters={"label": LABEL})
    except Exception:
        return removed
    for container in stale:
        deadline = container.labels.get(f"{LABEL}.deadline", "")
        if deadline.isdigit() and int(deadline) < (time.time() if now is None else now):
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
            command=[self.python, *PYTHON_FLAGS, "/job/init.py", "/job/harness/main.py", "/job"],
            user=f"{self.uid}:{self.uid}", working_dir="/job/scratch", hostname="sandbox",
            environment={"PATH": "/opt/venv/bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/job/scratch",
                         "TMPDIR": "/job/scratch", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                         "PYTHONHASHSEED": HASH_SEED},
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m", pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9), cpu_shares=CPU_SHARES if low_priority() else None,
            shm_size=f"{SHM_MB}m", ipc_mode="private",
            mounts=[Mount("/job", None, type="volume")],
            tmpfs={"/job/scratch": f"rw,nosuid,nodev,noexec,size={limits.scratch_mb}m,uid={self.uid},gid={self.uid},mode=0700",
                   "/tmp": f"rw,nosuid,nodev,noexec,size={TMP_MB}m,mode=1777"},
            ulimits=[Ulimit(name="core", soft=0, hard=0), Ulimit(name="nofile", soft=limits.files, hard=limits.files),
                     Ulimit(name="fsize", soft=fsize, hard=fsize)],
            log_config=LogConfig(type="none"),
            labels={LABEL: "1", f"{LABEL}.run": run_id, f"{LABEL}.deadline": str(int(deadline))},
            stdin_open=False, tty=False, detach=True)

    def layers(self, limits: Limits) -> dict:
        """The isolation record of a run, before the container exists."""
        return {"image": self.image, "user": self.uid, "network": "none", "read_only_root": True,
                "capabilities": "none", "seccomp": "docker default", "memory_mb": limits.memory_mb,
                "pids": limits.pids, "cpus": limits.cpus, "scratch_mb": limits.scratch_mb,
                # what container_config sets for every run: a container never has fewer
                "active": ["network:none", "read-only", "cap-drop:ALL", "no-new-privileges", f"non-root:{self.uid}",
                           "memory", "pids", "ipc:private", "seccomp:docker-default"], "weak": False}

    def _create(self, api, limits: Limits, deadline: float, layers: dict, stdin: bool = False):
        """Create the container, after sweeping stale ones (stdin: kept open for the go, see DockerStartedAhead)."""
        import docker
        sweep_stale(api)
        config = self.container_config(limits, uuid.uuid4().hex[:12], deadline)
        if stdin:
            # StdinOnce closes the container's stdin when our attach socket closes (the harness then sees EOF);
            # docker-py sets it only with detach=False, which for create() starts and attaches nothing.
            config.update(stdin_open=True, detach=False)
        try:
            container = api.containers.create(**config)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(f"runner image {self.image} is missing; build it with "
                                     f"scripts/build-runner-image.sh") from None
        layers["container"] = container.id[:12]
        layers["volume"] = next((m.get("Name") for m in container.attrs.get("Mounts", [])
                                 if m.get("Type") == "volume"), None)
        return container

    def run(self, job_dir: Path, limits: Limits, wall_s: float, on_frame=None) -> SandboxRun:
        """Create, fill, start and watch the container; remove it (and its volume) whatever happens."""
        started = time.monotonic()
        api = client(timeout=max(60.0, wall_s + 30))
        container = sock = None
        layers = self.layers(limits)
        try:
            container = self._create(api, limits, time.time() + wall_s + MARGIN_S, layers)
            if not container.put_archive("/job", job_tar(job_dir)):
                raise SandboxUnavailable("put_archive refused the job")
            # Attach before start so no byte of the channel is lost; stdout and stderr arrive apart.
            sock = api.api.attach(container.id, stdout=True, stderr=True, stream=True, logs=False, demux=True)
            stdout = _Stdout(sock)
            collector = FrameCollector(stdout, limits.output_mb << 20, on_frame, lambda: time.monotonic() - started)
            container.start()
            collector.start()
            return self._watch(container, collector, stdout, layers, limits, wall_s, started)
        finally:
            if sock is not None:
                try:
                    sock.close()
                except Exception:
                    pass
            if container is not None:
                self._remove(container)
            api.close()

    def prepare(self, limits: Limits) -> Prepared:
        """A container started now, ahead of its job: torch imported, waiting on its stdin for the go."""
        return DockerStartedAhead(self, new_job_dir(), limits)

    def _watch(self, container, collector: FrameCollector, stdout: "_Stdout", layers: dict, limits: Limits,
               wall_s: float, go_at: float, ahead_s: float = 0.0) -> SandboxRun:
        """Wait for the started container within wall_s, kill it past that; report what came back (wall from go_at)."""
        import requests
        killed = kind = None
        try:
            result = container.wait(timeout=wall_s)
            exit_code = result.get("StatusCode")
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            killed = f"the sandbox ran longer than its {wall_s:g} s budget and was killed"
            kind = "timeout"
            self._kill(container)
            exit_code = None
        wall = time.monotonic() - go_at
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
        return SandboxRun(self.name, collector.frames, exit_code, killed, wall, collector.hello_at, log,
                          layers=layers, ident=container.id, killed_kind=kind, ahead_s=round(ahead_s, 3))

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


class DockerStartedAhead(Prepared):
    """A container started before its job: harness and init copied in, torch imported, waiting on stdin for the go.

    One attach socket carries stdin (the go) and stdout/stderr (frames, log). If the worker dies, the socket
    closes, StdinOnce closes the container's stdin, the harness reads EOF with no job.json and exits; the
    stopped container is removed by a sweep once its deadline label (start + IDLE_S + MARGIN_S) has passed.
    """

    def __init__(self, sandbox: DockerSandbox, job_dir: Path, limits: Limits):
        super().__init__(sandbox, job_dir, limits)
        self.ran = self.talking = False
        self.container = self.sock = self.collector = self.on_frame = None
        self.ident = ""  # the container's id, kept after close() to check nothing is left
        self.layers = sandbox.layers(limits)
        self.started_at = time.monotonic()
        self.deadline = time.time() + IDLE_S + MARGIN_S
        self.api = client()
        try:
            from docker.utils.socket import demux_adaptor, frames_iter
            self.container = sandbox._create(self.api, limits, self.deadline, self.layers, stdin=True)
            self.ident = self.container.id
            # Only the harness and init so far (job_dir holds nothing else yet); run() adds the job.
            if not self.container.put_archive("/job", job_tar(job_dir)):
                raise SandboxUnavailable("put_archive refused the harness")
            self.sock = self.api.api.attach_socket(self.container.id,
                                                   params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            self.stdout = _Stdout(demux_adaptor(*frame) for frame in frames_iter(self.sock, tty=False))
            self.collector = FrameCollector(self.stdout, limits.output_mb << 20, self._forward,
                                            lambda: time.monotonic() - self.started_at)
            self.container.start()
            self.collector.start()
        except BaseException:
            self._stop()
            remove_tree(job_dir)
            raise

    def _raw_socket(self):
        """The attach connection's socket: docker-py hands out a read-only SocketIO over it (or, on TLS, the socket)."""
        return getattr(self.sock, "_sock", self.sock)

    def _forward(self, header: dict, blob: bytes = b"") -> None:
        """The collector's callback: frames go to whoever runs the job, once one does."""
        if self.on_frame is not None:
            self.on_frame(header, blob)

    def alive(self) -> bool:
        """Unused, its frame stream still open and the container running (the hello came or still may)."""
        if self.ran or not self.collector.thread.is_alive():
            return False
        try:
            self.container.reload()
        except Exception:  # removed under us (a sweep, an operator)
            return False
        return self.container.status == "running"

    def wait_ready(self, timeout_s: float = 60.0) -> bool:
        """Until the harness has said hello (torch imported); False if it died or the time ran out."""
        return wait_for_hello(self.collector, timeout_s, lambda: not self.ran and self.collector.thread.is_alive())

    def run(self, wall_s: float, on_frame=None) -> SandboxRun:
        """Copy the job in, give the go; the wall-clock budget counts from the go."""
        if self.ran:
            raise RuntimeError("a sandbox serves one job only")
        self.ran = True
        if time.time() + wall_s + MARGIN_S > self.deadline and not self.talking:
            # It waited so long that a sweep could remove it mid-run: run cold instead, on the same job directory.
            self._stop()
            return self.sandbox.run(self.job_dir, self.limits, wall_s, on_frame)
        if not self.container.put_archive("/job", job_tar(self.job_dir, job_only=True)):
            raise SandboxUnavailable("put_archive refused the job")
        for header, blob in list(self.collector.frames):  # only hello can have come before the go
            if on_frame:
                on_frame(header, blob)
        self.on_frame = on_frame
        go_at = time.monotonic()
        try:
            self._raw_socket().sendall(b"g")
        except OSError:
            pass  # the harness is gone already: the frames say what happened
        return self.sandbox._watch(self.container, self.collector, self.stdout, self.layers, self.limits, wall_s,
                                   go_at, ahead_s=go_at - self.started_at)

    def talk(self, on_ask) -> None:
        """Answer the job's interactive stages over the attach socket, which carries stdin (see Prepared.talk)."""
        def reply(header: dict, blob: bytes = b"") -> None:
            try:
                self._raw_socket().sendall(wire.encode_frame(header, blob))
            except (OSError, AttributeError):
                pass  # the container is gone (or being killed): its frames say what happened
        self.talking = True
        self.collector.on_ask = lambda header, blob: on_ask(header, blob, reply)

    def _stop(self) -> None:
        """Kill and remove the container and its volume, whether or not it ran; close the socket and the client."""
        self.ran = True
        try:
            if self.container is not None:
                self.sandbox._remove(self.container)  # force: kills it first
            if self.sock is not None:
                try:  # a shutdown ends the collector's read with EOF; a close under it would raise in its thread
                    self._raw_socket().shutdown(socket.SHUT_RDWR)
                except (OSError, AttributeError):
                    pass
                if self.collector is not None and self.collector.thread.ident is not None:
                    self.collector.join(timeout=10)
                self.sock.close()
        finally:
            self.container = self.sock = None
            self.api.close()
