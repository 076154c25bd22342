"""One cgroup per sandbox run: a memory cap (memory = memory + swap), a pids cap, and a kill of everything in it.

cgroup v2 where its memory controller is available (memory.max, pids.max, cgroup.kill); else
cgroup v1 hierarchies (memory.limit_in_bytes, memory.memsw.limit_in_bytes, pids.max). Used only
when the hierarchy is writable (root on a VM or a privileged container); otherwise the run goes on
without, and the run records that.

A run of low priority (base.low_priority(): a service's worker) also joins a group of the cgroup v1 cpu controller,
under PARENT, whose cpu.shares CPU_SHARES (a nice-0 task has 1024; nice 19 is 15) holds all such sandboxes together:
they take every core nobody else wants and yield at once to the web, the database and the workers (issue 19); a
student cannot leave the group (its files are root's). A worker's judge (its pool process) joins JUDGE, whose
shares lie between: it yields to the web and the database, and still comes before the sandboxes it checks. On cgroup
v2 only the nice level (process.py) applies: its single hierarchy would put the weight on every sandbox's parent,
`grader check`'s too (not done: v2 untested here).
Other runs stay out of the cpu controller and are scheduled like any other session. CPU is bounded per stage by
RLIMIT_CPU and the wall clock.
"""
import os
import signal
import time
import uuid
from pathlib import Path

from .isolation import cache_success

ROOT = Path("/sys/fs/cgroup")
PARENT = "grader-sandbox"
CPU_SHARES = 16  # cgroup v1 cpu.shares (2-262144; a nice-0 task is 1024): nice 19 is 15


# A worker's judge (its pool process) between the two (issue 19): its replay of each training step yields to the web
# and the database (a nice-0 task is 1024) and still comes before the sandboxes (CPU_SHARES), whose steps it checks.
JUDGE = "grader-judge"
JUDGE_SHARES = 256  # about nice 6


class CgroupUnavailable(RuntimeError):
    """No writable cgroup hierarchy with a memory controller."""


def _write(path: Path, value) -> None:
    with open(path, "w") as fh:
        fh.write(str(value))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _events(text: str) -> dict:
    """'key value' lines -> {key: int}."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


@cache_success()
def detect() -> tuple[str, dict] | str:
    """('v2', {controller: dir}) or ('v1', {controller: dir}) when usable, else the reason it is not."""
    if os.geteuid() != 0:
        return "cgroups need root to create a child group"
    controllers = _read(ROOT / "cgroup.controllers").split()
    if "memory" in controllers:
        parent = ROOT / PARENT
        try:
            parent.mkdir(exist_ok=True)
            wanted = [c for c in ("memory", "pids") if c in controllers]
            enabled = _read(ROOT / "cgroup.subtree_control").split()
            for c in wanted:
                if c not in enabled:
                    _write(ROOT / "cgroup.subtree_control", f"+{c}")
            for c in wanted:
                _write(parent / "cgroup.subtree_control", f"+{c}")
        except OSError as exc:
            return f"cgroup v2 is not writable here: {exc}"
        return "v2", {"unified": parent}
    dirs = {}
    for c in ("memory", "pids", "cpu"):
        base = ROOT / c
        if not (base / "cgroup.procs").exists():
            continue
        try:
            (base / PARENT).mkdir(exist_ok=True)
            if c == "cpu":
                _write(base / PARENT / "cpu.shares", CPU_SHARES)
        except OSError as exc:
            if c == "memory":
                return f"cgroup v1 memory hierarchy is not writable here: {exc}"
            continue
        dirs[c] = base / PARENT
    if "memory" not in dirs:
        return "no cgroup memory controller is mounted"
    return "v1", dirs


def join_judge_group() -> str | None:
    """Move this process (and the children it starts) into the cgroup v1 cpu group JUDGE; None, or why it could not."""
    if os.geteuid() != 0:
        return "cgroups need root"
    group = ROOT / "cpu" / JUDGE
    if not (group.parent / "cgroup.procs").exists():
        return "no cgroup v1 cpu controller is mounted"
    try:
        group.mkdir(exist_ok=True)
        _write(group / "cpu.shares", JUDGE_SHARES)
        _write(group / "cgroup.procs", os.getpid())  # v1: the whole process, every thread
    except OSError as exc:
        return f"the cpu controller is not writable here: {exc}"
    return None


def reap_stale(parents: dict) -> None:
    """Remove run groups whose worker died before it could (run-PID-...: that PID is gone); empty ones only."""
    for parent in parents.values():
        for d in parent.glob("run-*-*"):
            pid = d.name.split("-")[1]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                try:
                    d.rmdir()
                except OSError:
                    pass  # still has processes: the next sweep, once they are gone


class RunCgroup:
    """The cgroup(s) of one run; join() runs in the child, kill() and remove() in the judge."""

    def __init__(self, memory_mb: int, pids: int, low_cpu: bool = False):
        found = detect()
        if isinstance(found, str):
            raise CgroupUnavailable(found)
        self.version, parents = found
        if not low_cpu:
            parents = {c: p for c, p in parents.items() if c != "cpu"}
        reap_stale(parents)
        name = f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.dirs = {c: p / name for c, p in parents.items()}
        limit = memory_mb << 20
        try:
            for d in self.dirs.values():
                d.mkdir()
            if self.version == "v2":
                d = self.dirs["unified"]
                _write(d / "memory.max", limit)
                if (d / "memory.swap.max").exists():
                    _write(d / "memory.swap.max", 0)
                if (d / "pids.max").exists():
                    _write(d / "pids.max", pids)
            else:
                mem = self.dirs["memory"]
                _write(mem / "memory.limit_in_bytes", limit)
                if (mem / "memory.memsw.limit_in_bytes").exists():
                    _write(mem / "memory.memsw.limit_in_bytes", limit)
                if "pids" in self.dirs:
                    _write(self.dirs["pids"] / "pids.max", pids)
        except OSError as exc:
            self.remove()
            raise CgroupUnavailable(f"could not set up the run's cgroup: {exc}") from None
        self.procs_files = [str(d / "cgroup.procs") for d in self.dirs.values()]

    def describe(self) -> str:
        """For the run record."""
        return f"{self.version}:" + ",".join(sorted(self.dirs))

    def join(self) -> None:
        """Move the calling process into the run's cgroup(s); call from preexec_fn, before dropping root."""
        pid = str(os.getpid())
        for path in self.procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid.encode())
            finally:
                os.close(fd)

    def pids(self) -> list[int]:
        """Every process still in the run's cgroup."""
        main = self.dirs.get("unified") or self.dirs.get("memory")
        return [int(p) for p in _read(main / "cgroup.procs").split()]

    def kill(self, timeout: float = 5.0) -> bool:
        """SIGKILL everything in the cgroup (daemons that left our process group included); True once empty."""
        kill_file = self.dirs.get("unified", Path("/nonexistent")) / "cgroup.kill"
        deadline = time.monotonic() + timeout
        while True:
            if kill_file.exists():
                try:
                    _write(kill_file, 1)
                except OSError:
                    pass
            # v1 has no cgroup.kill: kill what is listed until nothing is (a fork racing us shows up next round).
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if not self.pids():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)

    def stats(self) -> dict:
        """What the limits saw: OOM kills, peak memory (MiB), whether the pids cap refused a fork."""
        out = {}
        if self.version == "v2":
            d = self.dirs["unified"]
            ev = _events(_read(d / "memory.events"))
            out["oom_kills"] = ev.get("oom_kill", 0)
            peak = _read(d / "memory.peak").strip()
            pev = _events(_read(d / "pids.events"))
            out["pids_refused"] = pev.get("max", 0)
        else:
            mem = self.dirs["memory"]
            out["oom_kills"] = _events(_read(mem / "memory.oom_control")).get("oom_kill", 0)
            peak = _read(mem / "memory.max_usage_in_bytes").strip()
            if "pids" in self.dirs:
                out["pids_refused"] = _events(_read(self.dirs["pids"] / "pids.events")).get("max", 0)
        if peak.isdigit():
            out["peak_mb"] = round(int(peak) / (1 << 20), 1)
        return out

    def remove(self) -> None:
        """Delete the run's cgroup(s); a cgroup with processes left cannot be removed, so kill first."""
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # the last exiting task may still be leaving
