"""Nothing outlives a grading: a submission leaves SysV objects, /run/lock files, 3000-deep trees, 100k files,
mode-000 directories, FIFOs or a daemon; then a correct one on the same backend gets full marks and finds no trace."""
import pytest


from .support import VARIANTS, grade_attack, grade_reference, sandbox_for, traces

pytestmark = pytest.mark.slow

LEFTOVER_ATTACKS = ("sysv_ipc", "run_lock", "deep_tree", "many_files", "odd_files", "daemon")
# What each attack prints it left (its stdout is in the report): the test is void if it left nothing.
LEFT = {"sysv_ipc": ["left sysv shm=2 msg=2 sem=2"],
        "run_lock": ["left files in /"],  # at least one place written: the list of places starts with "/"
        "deep_tree": ["left a tree in /tmp: 3000 levels", "left a tree in .: 3000 levels"],
        "many_files": ["left files in .: 100000"],
        "odd_files": ["left odd entries in /tmp", "left odd entries in ."],
        "daemon": []}
# Without bwrap the host's own world-writable places are the sandbox's: the sweep must find them.
LEFT_WEAK = {"run_lock": ["/run/lock", "/var/tmp", "/tmp"], "many_files": ["left files in /tmp: 100000"]}
PARAMS = [pytest.param(a, v, id=f"{a}-{v}", marks=[pytest.mark.docker] if v == "docker" else [])
          for a in LEFTOVER_ATTACKS for v in VARIANTS]


@pytest.mark.parametrize("attack,variant", PARAMS)
def test_no_trace_and_next_grades_fully(attack, variant):
    sandbox = sandbox_for(variant)
    report = grade_attack(attack, sandbox)
    got = {c["id"]: (c["status"], c["message"]) for c in report["checks"]}
    assert all(s == "pass" for s, _ in got.values()), f"{attack} answers correctly after leaving things: {got}"
    printed = next(c["stdout"] for c in report["checks"] if c["id"] == "attention_sdpa")
    for text in LEFT[attack] + (LEFT_WEAK.get(attack, []) if variant == "process-weak" else []):
        assert text in printed, f"{attack} on {variant} did not leave what it should (the test proves nothing): {printed}"
    run = sandbox.runs[-1]
    assert traces(run, sandbox.job_dirs[-1], sandbox.ended[-1]) == [], f"left behind by {attack} on {variant}"
    if variant == "process-weak":
        assert report["sandbox"]["weak"] is True, report["sandbox"]
    else:
        assert report["sandbox"]["weak"] is False and report["sandbox"]["layers"], report["sandbox"]

    after = grade_reference(sandbox)
    statuses = {c["id"]: c["status"] for c in after["checks"]}
    assert set(statuses.values()) == {"pass"}, f"the reference graded after {attack} on {variant}: {after['checks']}"
    assert traces(sandbox.runs[-1], sandbox.job_dirs[-1], sandbox.ended[-1]) == [], "the reference's run left traces"
