"""A stage's budget counts only the time it could run (grader/harness/runclock.py): a worker's sandboxes run at the
lowest CPU priority, so a busy machine can hold a stage back far beyond its slack, and that wait, or a wait for the
judge's answer, must not become a "ran out of time" verdict. A hang still ends at its budget.

The busy machine is real: processes spinning at the normal priority on every core, against the sandbox's nice 19 (and,
as root, its cgroup of low CPU weight)."""
import os
import time
from contextlib import ExitStack, contextmanager

import pytest

from grader.harness import main as harness
from grader.harness import runclock, wire
from grader.judge import Options
from grader.sandbox import base
from grader.sandbox.base import Limits
from tests.ci import missing
from tests.support.grading import REFERENCES, by_id, explain, grade_started_ahead

pytestmark = pytest.mark.slow


@contextmanager
def busy_cores(cpus=None):
    """A process spinning at the normal priority on each of cpus (all of this process's cores by default)."""
    pids = []
    for cpu in sorted(cpus or os.sched_getaffinity(0)):
        pid = os.fork()
        if pid == 0:
            os.sched_setaffinity(0, {cpu})
            while True:
                pass
        pids.append(pid)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, 9)
            os.waitpid(pid, 0)


SANDBOX_UID = 65534  # the stage's processes have a uid of their own, as in a sandbox: the CPU the harness counts


def stage_child(work) -> tuple[int, int]:
    """Fork a stage-like child that runs work(send) and exits; (pid, the read end of its frames)."""
    if os.geteuid() != 0:
        missing("a stage-like child of a uid of its own needs root (CI runs as root)")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            os.setpgid(0, 0)  # a group of its own to be killed by, in this session: nice 19 is weighed within it
            os.setuid(SANDBOX_UID)
            work(lambda header: wire.write_frame(write_fd, header))
        finally:
            os._exit(0)
    os.close(write_fd)
    while runclock.real_uid(pid) != SANDBOX_UID:  # as the harness finds its children: already the sandbox's
        time.sleep(0.001)
    return pid, read_fd


def read(pid, read_fd, budget, relay=None) -> tuple[dict, float]:
    """harness.read_stage on the child: what it saw and how long it took."""
    started = time.monotonic()
    try:
        state = harness.read_stage(read_fd, pid, budget, 1 << 20, relay)
    finally:
        os.close(read_fd)
    return state, time.monotonic() - started


def spin_at_lowest_priority(cpu_s: float):
    """Work for a child: cpu_s of CPU on core 0 at nice 19, then a result frame."""
    def work(send):
        os.sched_setaffinity(0, {0})
        os.nice(19)
        end = time.process_time() + cpu_s
        while time.process_time() < end:
            pass
        send({"type": "result", "outcome": "ok"})
    return work


def test_a_stage_held_back_from_the_cpu_is_not_timed_out_for_it():
    """0.03 s of CPU at about 1.4 % of the core: some 2 s, beyond the 1 s budget and within its 4 budgets more."""
    with busy_cores({0}):
        pid, fd = stage_child(spin_at_lowest_priority(0.03))
        state, took = read(pid, fd, budget=1.0)
    assert took > 1.0, f"the control: the busy core held the stage back beyond its budget ({took:.2f} s)"
    assert not state["timed_out"] and state["result"] is not None, state


# A process and 15 forks of it spinning on core 0, keeping one another waiting (unbounded, the first one's waits alone
# would stretch a 0.5 s budget to 8 s, and the cap of 4 budgets more to 2.5 s).
SPINNING_FORKS = """
import os
os.sched_setaffinity(0, {0})
for _ in range(15):
    if os.fork() == 0:
        break
while True:
    pass
"""


def spinning_forks(send):
    """Work for a child: SPINNING_FORKS."""
    exec(SPINNING_FORKS, {})


def test_processes_that_keep_one_another_waiting_are_not_held_back():
    """The child waits for the CPU most of the time, but only for its own forks: the stage still ends at its budget."""
    pid, fd = stage_child(spinning_forks)
    state, took = read(pid, fd, budget=0.5)
    assert state["timed_out"] and took < 1.5, (state, took)  # unbounded: 2.5 s, its cap


def test_a_hang_still_ends_at_its_budget_on_a_busy_machine():
    with busy_cores({0}):
        pid, fd = stage_child(lambda send: time.sleep(60))
        state, took = read(pid, fd, budget=0.5)
    assert state["timed_out"] and took < 5, (state, took)


def waits_for_the_judge(marked: bool):
    """Work for an interactive child: 1.5 s waiting for an answer (marked as such, or not), then a result."""
    def work(send):
        if marked:
            send({"type": "waiting"})
        time.sleep(1.5)
        if marked:
            send({"type": "heard"})
        send({"type": "result", "outcome": "ok"})
    return work


@pytest.mark.parametrize("marked", [True, False], ids=["a wait for the judge", "the same sleep, unmarked"])
def test_a_wait_for_the_judges_answer_is_not_the_stages_time(marked):
    pid, fd = stage_child(waits_for_the_judge(marked))
    state, took = read(pid, fd, budget=0.5, relay=lambda header, blob: None)
    assert state["timed_out"] is not marked, (state, took)


def test_the_marks_count_only_in_an_interactive_stage():
    """A stage that asks the judge nothing has no answer to wait for: its marks are a hang's."""
    pid, fd = stage_child(waits_for_the_judge(True))
    state, _ = read(pid, fd, budget=0.5, relay=None)
    assert state["timed_out"], state


CHECKS = ["split_heads", "attention_sdpa", "rope", "causality", "padding", "kv_cache"]


def test_a_workers_grading_on_a_busy_machine_gets_the_same_verdicts(monkeypatch):
    """A worker's sandbox (lowest priority) with every core busy at the normal priority: each check's stage takes
    longer than its 1.5 s budget on the wall clock (within its 4 budgets more), and every check still passes."""
    monkeypatch.setattr(base, "_LOW_PRIORITY", [True])
    options = Options(only=tuple(CHECKS), limits=Limits(stage_s=1.5))
    text = REFERENCES["lm"].read_text()
    with ExitStack() as hogs:  # the cores get busy once the sandbox waits for its job
        report = grade_started_ahead(text, options, before=lambda prepared: hogs.enter_context(busy_cores()))
    checks = by_id(report)
    assert {c: checks[c]["status"] for c in CHECKS} == dict.fromkeys(CHECKS, "pass"), explain(report)
    stages = report["timings"]["stages"]
    assert max(stages.values()) > 1.5, f"the control: no stage was held back beyond its budget: {stages}"


def sandbox_like(code: str, answering=None, nice: int = 19):
    """A process standing for a sandbox (on core 0, nice 19 by default), as process.backstop and _await_end see a
    run."""
    import subprocess
    import sys
    from types import SimpleNamespace
    proc = subprocess.Popen([sys.executable, "-c", code], process_group=0,  # this session: nice 19 weighs here
                            preexec_fn=lambda: (os.sched_setaffinity(0, {0}), os.nice(nice)))
    group = SimpleNamespace(pids=lambda: in_group(proc.pid))
    return SimpleNamespace(proc=proc, cgroup=group, answering=answering or runclock.Pauses(), collector=None)


def in_group(pgid: int) -> list[int]:
    """The processes of a process group (standing for a run's cgroup)."""
    pids = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if int(fh.read().rpartition(b")")[2].split()[2]) == pgid:
                    pids.append(int(name))
        except (OSError, ValueError, IndexError):
            pass
    return pids


HELD_BACK = """
import os
def delay():
    return int(open(f"/proc/{os.getpid()}/schedstat").read().split()[1]) / 1e9
while delay() < 10.8:  # runnable the whole time: it only waits for the busy core
    pass
"""


def await_end(run, wall_s) -> tuple[str, float]:
    """process._await_end on the run with its backstop: how it ended and when."""
    import subprocess
    from grader.sandbox.process import _await_end, backstop
    go_at = time.monotonic()
    try:
        _await_end(run, backstop(run, wall_s, go_at), early=False)
        ended = "exited"
    except subprocess.TimeoutExpired:
        ended = "killed"
    finally:
        if run.proc.poll() is None:  # what it left behind: its group, spinning or asleep
            os.killpg(run.proc.pid, 9)
        run.proc.wait()
    return ended, time.monotonic() - go_at


def test_the_sandbox_backstop_does_not_count_a_wait_for_the_cpu():
    """10.8 s of waiting for the busy core (and a moment to start): beyond a 10 s wall clock, within its quarter more."""
    with busy_cores({0}):
        ended, took = await_end(sandbox_like(HELD_BACK), wall_s=10.0)
    assert took > 10.0, f"the control: the sandbox was held back beyond its wall clock ({took:.2f} s)"
    assert ended == "exited", took


def test_the_sandbox_backstop_does_not_count_the_judges_answering_up_to_a_quarter_more():
    answering = runclock.Pauses()
    answering.begin()  # the judge holds its answer (a fed stage waits for its step) from the start
    ended, took = await_end(sandbox_like("import time; time.sleep(4.4)", answering), wall_s=4.0)
    assert ended == "exited" and took > 4.0, took
    answering = runclock.Pauses()
    answering.begin()  # an answer that never ends (a harness that stops reading): the backstop still ends the run
    ended, took = await_end(sandbox_like("import time; time.sleep(60)", answering), wall_s=1.0)
    assert ended == "killed" and 1.2 <= took < 3, took


def test_the_sandbox_backstop_still_ends_a_hang():
    ended, took = await_end(sandbox_like("import time; time.sleep(60)"), wall_s=1.0)
    assert ended == "killed" and took < 1.2, took


def test_the_sandbox_backstop_sees_processes_that_keep_one_another_waiting():
    """16 processes spinning on one core wait most of the time, but only for one another: held back by nothing."""
    run = sandbox_like(SPINNING_FORKS, nice=0)
    group = runclock.GroupWaits(run.cgroup.pids)
    held = runclock.HeldBack(group.waits, group.cpu)
    try:
        for _ in range(20):
            time.sleep(0.1)
            group.poll()
        waits, held_back = group.waits(), held()
    finally:
        os.killpg(run.proc.pid, 9)
        run.proc.wait()
    assert waits > 5, f"the control: the processes did wait for one another ({waits:.2f} s in all)"
    assert held_back < 0.5, held_back
