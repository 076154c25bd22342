"""Time limits counted in the time a stage could run: the wall clock less its waits for a CPU and for the judge.

A worker's sandboxes run at the lowest CPU priority so that the pages win over grading (docs/sandbox.md, "CPU
priority"), and its judge, which answers the training's questions, at a low one. On a machine kept busy by other work a
stage can then wait for longer than its slack, and a plain wall-clock limit would turn that wait into a "ran out of
time" verdict: the same submission, a different score. So neither wait counts:
- for a CPU: the kernel counts each task's run-queue delay (/proc/<pid>/schedstat, its second field); only a task
  that wants the CPU accrues it, so a hang (a sleep, a blocking read) still ends at the budget;
- for the judge: an interactive stage marks the waits for an answer (Pauses), the harness from the child's frames,
  the process sandbox around its own answering.
What is not counted is never more than the wall clock less the CPU that the sandbox's processes used meanwhile
(HeldBack): processes that keep one another waiting (a submission's forks that spin) were held back by nothing;
each Deadline caps it besides (the harness at 4 budgets, the process sandbox at a quarter of its wall clock). A
stage's CPU time stays limited on its own (RLIMIT_CPU and the harness's reading of /proc/<pid>/stat), and the process
sandbox's wall clock, the backstop, believes no mark from inside: it counts only what the judge saw itself.

Standard library only: the harness imports it inside the sandbox.
"""

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def run_delay(pid: int) -> float | None:
    """Seconds the main thread of pid has waited, runnable, for a CPU so far; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int, reaped: bool = True) -> float | None:
    """CPU seconds of pid (utime, stime) and, reaped, of the children it has reaped (cutime, cstime); None when
    unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rpartition(b")")[2].split()  # the command name may hold ")" or spaces
        return sum(int(f) for f in fields[11:15 if reaped else 13]) / CLOCK_TICKS
    except (OSError, ValueError):
        return None


def real_uid(pid: int) -> int | None:
    """The real uid of pid (its /proc directory belongs to root once it is not dumpable), None when unreadable."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def uid_cpu_seconds(uid: int) -> float:
    """CPU seconds of every process of uid that /proc shows (a sandbox's, in its PID namespace), reaped children
    included."""
    total = 0.0
    for name in os.listdir("/proc"):
        if name.isdigit() and real_uid(int(name)) == uid:
            total += cpu_seconds(int(name)) or 0.0
    return total


class HeldBack:
    """Seconds some processes were held back since this was made: what waits() has grown by (their waits for a CPU,
    for the judge), but never more than the wall clock less what cpu() has grown by (the CPU they all used)."""

    def __init__(self, waits, cpu):
        self.waits, self.cpu = waits, cpu  # () -> cumulative seconds, None when they cannot be read
        self.start = time.monotonic()
        self.waits0, self.cpu0 = waits() or 0.0, cpu() or 0.0

    def __call__(self) -> float | None:
        waits, cpu = self.waits(), self.cpu()
        if waits is None or cpu is None:
            return None
        return max(0.0, min(waits - self.waits0, time.monotonic() - self.start - (cpu - self.cpu0)))


class Deadline:
    """budget seconds from start, moved later by waited(), the seconds held back since then, up to cap seconds.

    waited() is read only once the deadline as it stands has passed (a /proc read per extension, not per frame); None
    from it (the process is gone, or /proc is unreadable) extends nothing.
    """

    def __init__(self, budget: float, waited, cap: float, start: float | None = None):
        self.start = time.monotonic() if start is None else start
        self.budget, self.waited, self.cap = budget, waited, cap
        self.extra = 0.0

    def remaining(self) -> float:
        """Seconds left, after leaving out what was held back since the start; <= 0 once the budget is spent."""
        left = self.start + self.budget + self.extra - time.monotonic()
        if left <= 0 and self.extra < self.cap:
            now = self.waited()
            if now is not None:
                self.extra = min(self.cap, max(self.extra, now))
                left = self.start + self.budget + self.extra - time.monotonic()
        return left

    def waited_s(self) -> float:
        """How much later than its budget the deadline now stands."""
        return round(self.extra, 3)


class Pauses:
    """The time a process spent waiting for the judge (its answer is the judge's time, not the stage's), from marks
    as they come: begin() when the wait starts, end() when it is over."""

    def __init__(self):
        self.total, self.since = 0.0, None

    def begin(self) -> None:
        if self.since is None:
            self.since = time.monotonic()

    def end(self) -> None:
        if self.since is not None:
            self.total += time.monotonic() - self.since
            self.since = None

    def __call__(self) -> float:
        """Seconds waited so far, the wait under way included."""
        since = self.since  # once: another thread may end the wait meanwhile
        return self.total + (time.monotonic() - since if since is not None else 0.0)


class GroupWaits:
    """A changing set of processes (a sandbox's cgroup) as HeldBack sees them: waits() their run-queue delays and cpu()
    their CPU, each summed over every process seen since the first poll.

    A process's figures are lost with it, so poll() is called often (about once a second) while they run; processes
    that waited at the same moment are each counted, which HeldBack's bound and the sandbox's cap keep in check.
    """

    def __init__(self, pids):
        self.pids = pids  # () -> list of pids, [] when it cannot tell
        self.seen: dict[int, tuple[float, float]] = {}  # pid -> (delay, cpu) at the last poll

    def poll(self) -> None:
        """Read every process's figures now."""
        try:
            pids = self.pids()
        except OSError:
            pids = []
        for pid in pids:
            delay, cpu = run_delay(pid), cpu_seconds(pid, reaped=False)  # a reaped child counts as itself
            if delay is not None and cpu is not None:
                self.seen[pid] = (delay, cpu)

    def waits(self) -> float:
        self.poll()
        return sum(delay for delay, _ in self.seen.values())

    def cpu(self) -> float:
        return sum(cpu for _, cpu in self.seen.values())
