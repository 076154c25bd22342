"""Real processes for the end-to-end tests: a Redis of our own, Celery workers, and the web app on a port."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from grader.harness.main import stat_fields

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    """Poll until predicate() is truthy; return its value, or raise TimeoutError naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def children(pid: int) -> list[int]:
    """The processes whose parent is pid, from /proc."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = stat_fields(entry)
        if fields is not None and int(fields[1]) == pid:
            found.append(int(entry))
    return found


class RedisServer:
    """redis-server on a spare port, without persistence: a restart loses every queued job, the worst case."""

    def __init__(self, workdir: Path):
        self.port, self.workdir, self.proc = free_port(), workdir, None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        exe = shutil.which("redis-server")
        if exe is None:
            raise FileNotFoundError("redis-server is not installed")
        self.proc = subprocess.Popen([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.ping, 10, what="redis-server to answer")
        return self

    def client(self):
        import redis
        return redis.Redis.from_url(self.url, socket_timeout=2, socket_connect_timeout=2)

    def ping(self) -> bool:
        try:
            return self.client().ping()
        except Exception:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


class Worker:
    """`grader worker` in its own process group, logging to a file."""

    def __init__(self, name: str, env: dict, logdir: Path, concurrency: int = 1, beat: bool = False):
        self.name, self.env, self.concurrency, self.beat = name, env, concurrency, beat
        self.log = logdir / f"worker-{name}.log"
        self.proc, self.starts = None, 0

    def start(self) -> "Worker":
        self.starts += 1
        cmd = [str(BIN / "grader"), "worker", "-c", str(self.concurrency), "-n", f"{self.name}@%h", "-l", "info"]
        if self.beat:
            cmd.append("--beat")
        with open(self.log, "ab") as fh:
            fh.write(f"\n===== start {self.starts} =====\n".encode())
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        marker = f"===== start {self.starts} ====="
        wait_for(lambda: "ready." in self.text().split(marker)[-1] or self.proc.poll() is not None, 90,
                 what=f"worker {self.name} to be ready")
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker {self.name} exited: {self.text()[-3000:]}")
        return self

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def owns(self, pid: int) -> bool:
        """Whether pid (a pool process) belongs to this worker's process group."""
        try:
            return self.proc is not None and os.getpgid(pid) == self.proc.pid
        except ProcessLookupError:
            return False

    def kill(self) -> None:
        """SIGKILL the whole worker (main process, pool and beat): a host that died."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


class LiveServer:
    """The Flask app served over real HTTP from a thread of the test process."""

    def __init__(self, app):
        from werkzeug.serving import make_server
        self.server = make_server("127.0.0.1", free_port(), app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> "LiveServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()


class Http:
    """A tiny JSON client over urllib (the API as any HTTP client sees it)."""

    def __init__(self, base: str):
        self.base = base

    def request(self, method: str, path: str, token: str, body: bytes | None = None,
                content_type: str | None = None) -> tuple[int, dict]:
        req = urllib.request.Request(self.base + path, data=body, method=method,
                                     headers={"Authorization": f"Bearer {token}",
                                              **({"Content-Type": content_type} if content_type else {})})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def get(self, path: str, token: str) -> tuple[int, dict]:
        return self.request("GET", path, token)

    def upload(self, slug: str, token: str, data: bytes, filename: str) -> tuple[int, dict]:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
                f"Content-Type: text/x-python\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        return self.request("POST", f"/api/v1/assignments/{slug}/submissions", token, body,
                            f"multipart/form-data; boundary={boundary}")


def cluster_app(pg_url: str, workdir: Path, settings: dict, secret_key: str = "test"):
    """A Redis of our own, the app on PostgreSQL with empty tables, and the environment a worker joins them by.

    Returns (app, redis, env). The web app and the workers get separate instance folders, as on two hosts.
    """
    from grader.app import create_app
    from .svc_helpers import empty_tables, unavailable
    try:
        redis = RedisServer(workdir).start()
    except FileNotFoundError as exc:
        unavailable(str(exc))
    settings = {"DATABASE_URL": pg_url, "BROKER_URL": redis.url, "SUBMISSIONS_DIR": str(workdir / "archive"),
                **settings}
    env = {**os.environ, "GRADER_INSTANCE_PATH": str(workdir / "worker-instance"),
           **{f"GRADER_{k}": json.dumps(v) if not isinstance(v, str) else v for k, v in settings.items()}}
    previous = os.environ.get("GRADER_INSTANCE_PATH")
    os.environ["GRADER_INSTANCE_PATH"] = str(workdir / "web-instance")
    try:
        app = create_app({**settings, "SECRET_KEY": secret_key})
    finally:
        os.environ.pop("GRADER_INSTANCE_PATH") if previous is None else os.environ.update(GRADER_INSTANCE_PATH=previous)
    empty_tables(app)
    return app, redis, env
