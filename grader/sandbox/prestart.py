"""Keep the next sandbox started ahead of its job, so its start and torch import leave the latency path.

A worker grades one submission at a time; between two jobs it would sit idle. The Prestarter uses that
time: when a job's sandbox is closed it starts the next one (every layer up, harness running, torch
imported), which then waits for a job. One sandbox still serves exactly one submission: isolation and
determinism are those of a cold start. Under a full queue the next job arrives at once and waits for
the start to finish, so the saving is what overlaps the previous job's scoring and storing; on an idle
queue it is the whole start (1-3 s here).
"""
import atexit
import logging
import queue
import threading

from .base import Limits, Prepared, Sandbox, settle

log = logging.getLogger(__name__)


class _Pending:
    """A sandbox to be started by the Prestarter's thread; result() waits for it (None when the start failed)."""

    def __init__(self, limits: Limits):
        self.limits, self.prepared, self.done = limits, None, threading.Event()

    def start(self, sandbox: Sandbox) -> None:
        try:
            self.prepared = sandbox.prepare(self.limits)
        except Exception:  # the job that comes next starts its own sandbox and reports the failure itself
            log.exception("starting a sandbox ahead of its job failed")
        finally:
            self.done.set()

    def result(self) -> Prepared | None:
        self.done.wait()
        return self.prepared


class Prestarter(Sandbox):
    """Wraps a backend: prepare() hands out the sandbox started ahead when it fits, and starts the next one."""

    def __init__(self, inner: Sandbox):
        self.inner, self.name = inner, inner.name
        self.lock = threading.Lock()
        self.pending: _Pending | None = None
        self.closed = False
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        # One thread that lives as long as the process starts every sandbox ahead: bwrap's --die-with-parent
        # kills a sandbox when the thread that started it ends, so a thread per start would kill its own.
        threading.Thread(target=self._serve, name="sandbox-prestart", daemon=True).start()
        atexit.register(self.close)

    def _serve(self) -> None:
        while True:
            self.requests.get().start(self.inner)

    def run(self, job_dir, limits, wall_s, on_frame=None):
        """A cold run on a job directory laid out elsewhere (as the wrapped backend does it)."""
        return self.inner.run(job_dir, limits, wall_s, on_frame)

    def prepare(self, limits: Limits) -> Prepared:
        """The sandbox started ahead if it has these limits and still waits; otherwise a new one, started now."""
        prepared = self._take(limits) or self.inner.prepare(limits)
        prepared.on_close = lambda: self.start_next(limits)
        return prepared

    def start_next(self, limits: Limits) -> None:
        """Start a sandbox for the next job, once the previous one is closed (or, done, being torn down: a few ms)."""
        with self.lock:
            if self.pending is None and not self.closed:
                self.pending = _Pending(limits)
                self.requests.put(self.pending)

    def wait_ready(self, timeout_s: float = 60.0) -> bool:
        """Until the sandbox started ahead (if any) has imported torch and the last one is torn down: for benchmarks,
        which must time neither."""
        settle()
        with self.lock:
            pending = self.pending
        prepared = pending.result() if pending is not None else None
        return prepared is not None and prepared.wait_ready(timeout_s)

    def _take(self, limits: Limits) -> Prepared | None:
        with self.lock:
            pending, self.pending = self.pending, None
        prepared = pending.result() if pending is not None else None
        if prepared is None:
            return None
        if prepared.limits == limits and prepared.alive():
            return prepared
        prepared.close()  # other limits (another assignment), or its harness died while waiting
        return None

    def close(self) -> None:
        """Stop the sandbox waiting for a job, if any; start no more."""
        with self.lock:
            self.closed = True
            pending, self.pending = self.pending, None
        prepared = pending.result() if pending is not None else None
        if prepared is not None:
            prepared.close()


_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def prestarted(backend: str | None = None) -> Prestarter:
    """This process's Prestarter for a backend (one per process: a worker's grading slot)."""
    from . import choose_backend, make_sandbox
    name, _ = choose_backend(backend or "auto")
    with _SHARED_LOCK:
        if name not in _SHARED:
            _SHARED[name] = Prestarter(make_sandbox(name))
        return _SHARED[name]
