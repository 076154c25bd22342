"""The worker's side of the fork server: one zygote per process, and each sandbox a fork of it (zygote.py).

The process backend's default as root (ProcessSandbox(fork=False), or GRADER_SANDBOX_FORK=false, turns it off): a
sandbox is isolated in tens of milliseconds with torch already imported, where a started one runs bubblewrap and
imports torch afresh (about a second of CPU). The zygote runs the runner's interpreter as root with nothing in its
environment but the sandboxes' hash seed, and holds nothing of the worker's: no setting, no job, no secret; it dies
with the worker (and its sandboxes with it).
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

from . import zygote
from .base import HASH_SEED, PYTHON_FLAGS

HARNESS = Path(__file__).resolve().parents[1] / "harness"
MAIN = Path(__file__).with_name("zygote_main.py")


class ForkServerDown(RuntimeError):
    """The zygote is gone or refused a sandbox: the worker's problem, never a student's."""


class Forked:
    """A sandbox forked by the zygote, as much of subprocess.Popen as the process backend uses."""

    def __init__(self, pid: int, stdin):
        self.pid, self.stdin, self.returncode, self.args = pid, stdin, None, "sandbox"
        self.ended = threading.Event()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self.ended.wait(timeout):
            raise subprocess.TimeoutExpired("sandbox", timeout)
        return self.returncode

    def send_signal(self, sig) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def shared(python: str) -> "ForkServer":
    """This process's fork server for that interpreter (one zygote serves every sandbox: it keeps nothing of them)."""
    with _SHARED_LOCK:
        if python not in _SHARED:
            _SHARED[python] = ForkServer(python)
        return _SHARED[python]


@atexit.register
def close_all() -> None:
    """End every zygote of this process and remove its harness copy (the zygote also removes it when it sees this
    process gone, however it ended)."""
    with _SHARED_LOCK:
        for server in _SHARED.values():
            server.close()


class ForkServer:
    """A zygote: started on first use (again if it died), asked for one sandbox at a time."""

    def __init__(self, python: str):
        self.python = python
        self.lock = threading.Lock()
        self.proc = self.sock = self.harness = None
        self.started: list = []
        self.replied = threading.Condition()
        self.forked: dict[int, Forked] = {}
        self.exits: dict[int, int] = {}

    def _start(self) -> None:
        if self.harness is not None:  # a zygote killed outright could not remove its own
            shutil.rmtree(self.harness, ignore_errors=True)
        # the harness, root-owned and world-readable where every sandbox sees it (bound read-only like the interpreter)
        self.harness = Path(tempfile.mkdtemp(prefix="grader-zygote-"))
        shutil.copytree(HARNESS, self.harness / "harness", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(zygote.__file__, self.harness / "zygote.py")
        shutil.copy(MAIN, self.harness / "zygote_main.py")
        for path in (self.harness, *self.harness.rglob("*")):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [self.python, *PYTHON_FLAGS, str(self.harness / "zygote_main.py"), str(self.harness / "zygote.py"),
             str(self.harness / "harness"), str(theirs.fileno())], pass_fds=(theirs.fileno(),),
            env={"PYTHONHASHSEED": HASH_SEED}, cwd="/",
            stdin=subprocess.DEVNULL, start_new_session=True)
        # No parent-death signal (it follows the thread that started it): the zygote ends when this process's end of
        # the socket closes, however this process ends, and every sandbox dies with the zygote (zygote.spawn).
        theirs.close()
        self.sock = mine
        threading.Thread(target=self._read, args=(mine,), name="fork-server", daemon=True).start()

    def _read(self, sock) -> None:
        """The zygote's messages: each reply to a request, and each sandbox's exit."""
        while True:
            try:
                message = sock.recv(1 << 16).decode()
            except OSError:
                message = ""
            with self.replied:
                if not message:  # the zygote is gone: so is every sandbox it forked
                    for forked in self.forked.values():
                        forked.returncode = -signal.SIGKILL
                        forked.ended.set()
                    self.forked.clear()
                    self.started.append("failed the fork server ended")
                    self.replied.notify_all()
                    return
                kind, _, rest = message.partition(" ")
                if kind == "exit":
                    pid, code = (int(x) for x in rest.split())
                    forked = self.forked.pop(pid, None)
                    if forked is None:
                        self.exits[pid] = code  # ended before spawn() registered it
                    else:
                        forked.returncode = code
                        forked.ended.set()
                else:
                    self.started.append(message)
                    self.replied.notify_all()

    def roots(self) -> list[str]:
        """What a sandbox must see read-only besides the interpreter: the harness the zygote imported."""
        return [str(self.harness)]

    def spawn(self, spec: dict, stdin_r: int, channel_w: int, log_w: int, stdin_w) -> Forked:
        """A sandbox for spec, with these descriptors as its stdin, channel and log (the zygote gets copies)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            spec = dict(spec, roots=[*spec.get("roots", ()), *self.roots()])
            with self.replied:
                self.started.clear()
                try:
                    socket.send_fds(self.sock, [json.dumps(spec).encode()], [stdin_r, channel_w, log_w])
                except OSError as exc:
                    raise ForkServerDown(f"the fork server did not take the request: {exc}") from None
                self.replied.wait_for(lambda: self.started, timeout=30)
                reply = self.started.pop(0) if self.started else "failed no reply in 30 s"
                kind, _, rest = reply.partition(" ")
                if kind != "started":
                    raise ForkServerDown(f"the fork server could not start a sandbox: {rest}")
                forked = Forked(int(rest), stdin_w)
                if forked.pid in self.exits:
                    forked.returncode = self.exits.pop(forked.pid)
                    forked.ended.set()
                else:
                    self.forked[forked.pid] = forked
                return forked

    def close(self) -> None:
        """Kill the zygote (its sandboxes die with it) and remove its harness copy; the next spawn starts another."""
        if self.proc is not None:  # no lock: at exit a spawn may hold it, and this must not wait for it
            self.sock.close()
            self.proc.kill()
            self.proc.wait(10)
            shutil.rmtree(self.harness, ignore_errors=True)
            self.proc = None
