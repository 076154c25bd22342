"""The sandbox interface: run the harness on a prepared job directory, return the frames it sent."""
import os
import shutil
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..harness import wire
from .cleanup import remove_tree


# A service's sandboxes yield the CPU to interactive work (issue 19: a status poll must not wait behind a grading):
# the worker turns this on (setting SANDBOX_LOW_PRIORITY, default on). `grader check` and the benchmarks' direct
# gradings, where the sandbox is what a person waits for, keep the normal priority. What it does: process.py, nice
# 19 and (as root) a cgroup of low CPU weight the sandbox cannot leave; docker.py, a low cpu_shares.
_LOW_PRIORITY = [False]


def set_low_priority(on: bool) -> None:
    """Sandboxes started from now on in this process (and its forks) yield the CPU to other work, or not."""
    _LOW_PRIORITY[0] = bool(on)


def low_priority() -> bool:
    return _LOW_PRIORITY[0]


JUDGE_NICE = 5  # where no cgroup can hold the judge: below the web's nice 0, above the sandboxes' 19


def lower_judge() -> str:
    """This process (a worker's judge) yields the CPU to the web and the database, not to its sandboxes; what it got."""
    from .cgroup import JUDGE, JUDGE_SHARES, join_judge_group
    os.setpriority(os.PRIO_PROCESS, 0, max(JUDGE_NICE, os.getpriority(os.PRIO_PROCESS, 0)))
    # nice alone counts only within this session's group of tasks (autogroup), and the web is another session
    why_not = join_judge_group()
    group = f"cpu group {JUDGE} (cpu.shares {JUDGE_SHARES})" if why_not is None else f"no cpu group: {why_not}"
    return f"nice {os.getpriority(os.PRIO_PROCESS, 0)}, {group}"


@dataclass
class Limits:
    """Resource limits for one submission's sandbox; each one reached is reported."""
    stage_s: float = 30.0  # wall clock per stage (one check)
    stage_mem_mb: int = 2048  # address space a stage may add after torch is imported
    memory_mb: int = 4096  # the whole sandbox (container or cgroup)
    pids: int = 64
    cpus: float = 1.0
    output_mb: int = 256  # bytes of results the judge accepts
    scratch_mb: int = 256
    startup_s: float = 60.0  # python start and torch import
    files: int = 256  # open files per process (RLIMIT_NOFILE)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


@dataclass
class SandboxRun:
    """What came back from one harness run."""
    backend: str
    frames: list = field(default_factory=list)
    exit_code: int | None = None
    killed: str | None = None  # why the judge stopped it early, if it did
    wall_s: float = 0.0
    hello_at_s: float | None = None  # seconds from start until the harness said hello
    log: str = ""  # the harness's own stderr: for instructors, never shown to students
    layers: dict = field(default_factory=dict)  # which isolation layers were on (or why not), what the limits saw
    ident: str = ""  # the run's uid (process) or container id (docker), to check nothing is left behind
    killed_kind: str | None = None  # timeout, oom or crash: the status of the check that was running when killed
    # seconds the sandbox ran before its job's go (started ahead); wall_s counts from the go, hello_at_s from the start
    ahead_s: float = 0.0


class FrameCollector:
    """Reads frames from a stream in a thread, with a byte cap, calling on_frame(header, blob) for each frame kept."""

    def __init__(self, stream, max_bytes: int, on_frame=None, clock=None):
        self.stream, self.max_bytes, self.on_frame, self.clock = stream, max_bytes, on_frame, clock
        self.frames, self.error, self.total = [], None, 0
        self.hello_at = None
        # The harness's done frame (its index in frames), and an event set once it is in or the stream has ended:
        # a sandbox started ahead returns its run there, before the harness's exit (StartedAhead.run).
        self.done_at = None
        self.ended = threading.Event()
        # An interactive stage's questions (`ask` frames) go here as they come, blob included, and are not kept:
        # the judge's trainer bounds each one itself (a run's steps add up to more than output_mb).
        self.on_ask = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        """Begin reading."""
        self.thread.start()
        return self

    def _run(self):
        reader = wire.FrameReader(self.max_bytes)
        try:
            while True:
                data = self.stream.read(1 << 20) if hasattr(self.stream, "read") else None
                if not data:
                    break
                self.total += len(data)
                if self.total > self.max_bytes:
                    self.error = f"the results exceeded {self.max_bytes >> 20} MiB"
                    break
                for header, blob in reader.feed(data):
                    if header.get("type") == "ask":
                        self.total -= len(blob)
                        if self.on_ask is not None:
                            self.on_ask(header, blob)
                        continue
                    if header.get("type") == "hello" and self.clock:
                        self.hello_at = self.clock()
                    self.frames.append((header, blob))
                    if self.on_frame:
                        self.on_frame(header, blob)
                    if header.get("type") == "done" and self.done_at is None:
                        self.done_at = len(self.frames) - 1  # set after on_frame: every frame before it is handled
                        self.ended.set()
        except wire.FrameError as exc:
            self.error = str(exc)
        except OSError as exc:
            self.error = f"reading the results failed: {exc}"
        finally:
            self.ended.set()

    def join(self, timeout=None):
        """Wait for the stream to close."""
        self.thread.join(timeout)

    def wait_done(self, timeout_s: float) -> bool:
        """True once the done frame is in; False when the stream ended without it or the time ran out."""
        self.ended.wait(timeout_s)
        return self.done_at is not None and self.error is None


def wait_for_hello(collector: FrameCollector, timeout_s: float, waiting) -> bool:
    """Poll until the harness has said hello (torch imported); False once waiting() is false or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while collector.hello_at is None:
        if not waiting() or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# How every sandbox interpreter starts (process.py, forkserver.py, docker.py; sandbox_init.py and zygote_main.py, which
# run without the grader, say the same): no user site (-s), no script folder on sys.path (-P), and one hash seed from
# its environment, so that a set of strings iterates in the same order in every grading. (-I would also ignore
# PYTHON* variables, PYTHONHASHSEED among them; the sandbox builds its environment from nothing, so -E adds nothing.)
PYTHON_FLAGS = ("-s", "-P")
HASH_SEED = "0"

HARNESS_DIR = Path(__file__).resolve().parent.parent / "harness"
# reference_parts: root causes; optimizer: the training step the sandbox takes ahead of the judge
HARNESS_FILES = ("main.py", "probes.py", "wire.py", "tensorbytes.py", "optimizer.py", "reference_parts.py",
                 "runclock.py")


def new_job_dir() -> Path:
    """A fresh job directory with the harness laid out and empty inputs/ and scratch/, readable by a sandbox uid."""
    job_dir = Path(tempfile.mkdtemp(prefix="grader-job-"))
    for sub in ("harness", "inputs", "scratch"):
        (job_dir / sub).mkdir(mode=0o755)
        os.chmod(job_dir / sub, 0o755)  # mkdir's mode is cut by the umask
    for name in HARNESS_FILES:
        shutil.copy(HARNESS_DIR / name, job_dir / "harness" / name)
        os.chmod(job_dir / "harness" / name, 0o644)
    # Only root until the process backend hands it to its run's uid (root:<uid> 0750 in _start): a weak sandbox on
    # this host must not read another job's submission in the meantime, nor a docker job's copy on the host.
    os.chmod(job_dir, 0o700)
    return job_dir


_CLOSING: set = set()  # the threads tearing down sandboxes whose job is done (Prepared.close)
_CLOSING_LOCK = threading.Lock()


def settle(timeout_s: float = 60.0) -> None:
    """Wait until every sandbox closed in the background is gone: before os._exit, and before a benchmark times."""
    with _CLOSING_LOCK:
        threads = list(_CLOSING)
    for thread in threads:
        thread.join(timeout_s)


class Prepared:
    """A job directory waiting for its job's files; run() then runs the harness on it, close() removes it.

    This one is cold: nothing runs until run(). Backends that can start the harness ahead of the job
    (torch imported, waiting for the go) return a subclass that does.
    """

    def __init__(self, sandbox: "Sandbox", job_dir: Path, limits: Limits):
        self.sandbox, self.job_dir, self.limits = sandbox, job_dir, limits
        self.on_close = None  # called once by close(): a Prestarter starts the next sandbox then
        self.closed = threading.Event()  # set once nothing of this sandbox is left (its uid is free again)

    def alive(self) -> bool:
        """Still able to take a job (a cold one always is)."""
        return True

    def wait_ready(self, timeout_s: float = 60.0) -> bool:
        """Wait until a sandbox started ahead has imported torch; False if it died or the time ran out."""
        return True

    def run(self, wall_s: float, on_frame=None) -> SandboxRun:
        """Run the harness on the job now laid out in job_dir."""
        return self.sandbox.run(self.job_dir, self.limits, wall_s, on_frame)

    def talk(self, on_ask) -> None:
        """Answer the job's interactive stages: on_ask(header, blob, reply) for each question, where
        reply(header, blob) writes to the harness's stdin. Only sandboxes started ahead keep stdin open."""
        raise NotImplementedError(f"the {self.sandbox.name} sandbox cannot run interactive stages cold")

    def close(self) -> None:
        """Stop whatever still runs and remove the job directory: at once, or in a thread when the job is done and
        only the teardown is left (lingering())."""
        hook, self.on_close = self.on_close, None
        if not self.lingering():
            self._close_now()
        else:
            # The verdicts are in: killing, sweeping and removing the sandbox (tens of ms, mostly the harness's
            # exit) leave the grading's latency path. Its uid stays leased until then; the next sandbox takes another.
            # Not a daemon: an exiting process waits for it (and os._exit callers call settle()).
            thread = threading.Thread(target=self._close_now, name="sandbox-teardown")
            with _CLOSING_LOCK:
                _CLOSING.add(thread)
            thread.start()
        if hook is not None:
            hook()

    def _close_now(self) -> None:
        try:
            self._stop()
            remove_tree(self.job_dir)  # iterative and per entry: a student's 3000-deep scratch tree must not raise
        finally:
            self.closed.set()
            with _CLOSING_LOCK:
                _CLOSING.discard(threading.current_thread())

    def lingering(self) -> bool:
        """The job is done but the sandbox may still run (a run returned at the done frame); a cold one never does."""
        return False

    def _stop(self) -> None:
        """Nothing runs in a cold job directory."""


class Sandbox(ABC):
    """A place to run untrusted code: subclasses differ in isolation, never in protocol."""
    name = "abstract"

    @abstractmethod
    def run(self, job_dir: Path, limits: Limits, wall_s: float, on_frame=None) -> SandboxRun:
        """Run harness/main.py on job_dir within the limits and the total wall-clock budget."""

    def prepare(self, limits: Limits) -> Prepared:
        """A job directory for the next job; the judge writes the job into it, then calls run() on it."""
        return Prepared(self, new_job_dir(), limits)
