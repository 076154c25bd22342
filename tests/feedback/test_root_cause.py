"""Root cause by substitution (grader/rootcause.py): a model-level failure is attributed to a contract function's
check only when the judge's version of that function makes the check pass, and never otherwise.

The submissions (tests/feedback/bugs.py, made at test time) are the references with one bug each in a contract
function (one per function, both tracks), and three where a function is wrong but a model-level failure comes from elsewhere.
Training and evaluation are left out: they are never re-run, so never attributed.
"""
import pytest

from grader.app.scoring import current_rubric
from grader.rootcause import COVERS
from rubric import score
from tests.support.grading import REFERENCES, explain, grade_text, statuses

from . import bugs

pytestmark = pytest.mark.slow

ONLY = ("split_heads", "attention_sdpa", "rope", "gradient_path", "causality", "padding", "kv_cache",
        "checkpoint_reload")
MODEL_LEVEL = {"gradient_path", "causality", "padding", "kv_cache", "checkpoint_reload"}
TRACKS = ("lm", "reverse")

# bug -> (the function check it breaks, the function named in the evidence, the model-level checks it breaks per
# track: each must carry that root cause)
BUGS = {
    "split_no_transpose": ("split_heads", "split_heads", {"lm": {"causality", "padding", "kv_cache"},
                                                          "reverse": {"causality", "padding", "kv_cache"}}),
    "merge_no_transpose": ("split_heads", "merge_heads", {"lm": {"causality", "padding", "kv_cache"},
                                                          "reverse": {"causality", "padding", "kv_cache"}}),
    "softmax_query_axis": ("attention_sdpa", "attention", {
        "lm": {"causality", "padding", "kv_cache"},
        # Track A's padded source rows get NaN from a softmax over queries: every model check fails
        "reverse": {"gradient_path", "causality", "padding", "kv_cache", "checkpoint_reload"}}),
    "rope_ignores_positions": ("rope", "apply_rope", {"lm": {"kv_cache"}, "reverse": {"kv_cache"}}),
}

# where the cause is elsewhere: known-bad name -> (the function check that fails, model-level checks failing for
# another reason (no root cause), model-level checks that the function explains (root cause))
ELSEWHERE = {
    # no 1/sqrt(Dh) (attention_sdpa fails) and an off-by-one causal mask in the model
    "scale_and_causal_leak_reverse": ("attention_sdpa", {"causality", "kv_cache"}, {}),
    # split_heads without the transpose, but the model splits heads with its own method (same bug)
    "split_in_model_lm": ("split_heads", {"causality", "padding", "kv_cache"}, {}),
    # apply_rope ignores its positions (kv_cache, explained) and the padding mask is inverted (not explained)
    "rope_and_padding_inverted_lm": ("rope", {"causality", "padding"}, {"kv_cache": "rope"}),
}


def graded(name: str) -> dict:
    return grade_text(bugs.source(name), only=ONLY)


def root_causes(report: dict) -> dict:
    """check id -> its root cause, for the checks that have one."""
    return {c["id"]: c["root_cause"] for c in report["checks"] if "root_cause" in c}


def failing(report: dict) -> set:
    return {cid for cid, s in statuses(report).items() if s != "pass"}


def test_one_known_bad_submission_per_contract_function_and_track():
    covered = {fn for _, fn, _ in BUGS.values()}
    assert covered == {fn for fns in COVERS.values() for fn in fns}, "every function COVERS names has a bug here"
    for bug in BUGS:
        for track in TRACKS:
            assert f"{bug}_{track}" in bugs.BUGS, f"no known-bad {bug}_{track} in tests/feedback/bugs.py"


@pytest.mark.parametrize("track", TRACKS)
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_function_bug_is_named_on_the_model_checks_it_breaks(bug, track):
    check, function, breaks = BUGS[bug][0], BUGS[bug][1], BUGS[bug][2][track]
    report = graded(f"{bug}_{track}")
    assert failing(report) == {check} | breaks, f"{bug}_{track}: the bug should fail {check} and " \
                                                f"{sorted(breaks)}\n{explain(report)}"
    causes = root_causes(report)
    assert set(causes) == breaks, f"{bug}_{track}: root causes on {sorted(causes)}, expected on {sorted(breaks)}"
    for cid in breaks:
        assert causes[cid]["check"] == check, f"{bug}_{track}: {cid} blames {causes[cid]['check']}, not {check}"
        assert causes[cid]["evidence"] == f"with a correct {function} in place of yours, {cid} passes", causes[cid]


@pytest.mark.parametrize("name", sorted(ELSEWHERE))
def test_no_root_cause_where_the_cause_is_elsewhere(name):
    check, elsewhere, explained = ELSEWHERE[name]
    report = graded(name)
    got = statuses(report)
    assert got[check] == "fail", f"{name}: {check} should fail\n{explain(report)}"
    assert all(got[cid] == "fail" for cid in elsewhere | set(explained)), explain(report)
    causes = root_causes(report)
    assert not set(causes) & elsewhere, f"{name}: a correct {check} does not fix {sorted(set(causes) & elsewhere)}, " \
                                        f"yet they got a root cause: {causes}"
    assert {cid: c["check"] for cid, c in causes.items()} == explained, causes


@pytest.mark.parametrize("name", sorted([f"{b}_{t}" for b in BUGS for t in TRACKS] + list(ELSEWHERE)))
def test_a_root_cause_names_a_failed_function_check_on_a_failed_model_check(name):
    report = graded(name)
    got = statuses(report)
    for cid, cause in root_causes(report).items():
        assert cid in MODEL_LEVEL and got[cid] != "pass", f"{name}: root cause on {cid} ({got[cid]})"
        assert cause["check"] in COVERS, f"{name}: {cid} blames {cause['check']}, not a contract function's check"
        assert got[cause["check"]] != "pass", f"{name}: {cid} blames {cause['check']}, which passed"
        assert set(cause) == {"check", "evidence"} and cause["evidence"].endswith(f"{cid} passes"), cause


@pytest.mark.parametrize("track", TRACKS)
def test_a_reference_gets_no_root_cause(track):
    report = grade_text(REFERENCES[track].read_text(), only=ONLY)
    assert set(statuses(report).values()) == {"pass"}, explain(report)
    assert not root_causes(report) and "root_cause_s" not in report["timings"], "nothing failed: nothing re-run"


def test_the_diagnosis_changes_no_status_or_message(monkeypatch):
    """The same submission graded without the diagnosis gives the same results but for the root causes."""
    import grader.judge

    with_diagnosis = graded("split_no_transpose_lm")
    monkeypatch.setattr(grader.judge, "attribute", lambda *args, **kwargs: None)
    without = grade_text(bugs.source("split_no_transpose_lm"), only=ONLY, stage_s=29.0)  # uncached
    assert root_causes(with_diagnosis) and not root_causes(without)
    assert results_but_root_causes(with_diagnosis) == results_but_root_causes(without)


def results_but_root_causes(report: dict) -> list:
    """Each check's result without its root cause and its wall-clock duration."""
    return [{k: v for k, v in c.items() if k not in ("root_cause", "duration_s")} for c in report["checks"]]


# Appended to a submission with a split_heads bug: only in a diagnosis run (the judge's split_heads bound in its
# module) does build_model walk the stack to the harness's send, claim every check passed, forge a result and exit.
GAME = '''

_split_heads_own = split_heads
_build_model_honest = build_model


def build_model(config):
    import os as _os
    import sys as _sys
    if split_heads is not _split_heads_own:
        frame = _sys._getframe()
        while frame is not None and "send" not in frame.f_locals:
            frame = frame.f_back
        if frame is not None:
            send = frame.f_locals["send"]
            for cid in ("split_heads", "causality", "padding", "kv_cache"):
                send({"type": "verdict", "check": {"id": cid, "status": "pass", "message": "GAMED"}})
            send({"type": "result", "outcome": "ok", "facts": {"gamed": True}})
        _os._exit(0)
    return _build_model_honest(config)
'''


def test_a_submission_that_games_the_diagnosis_run_changes_only_what_it_is_told():
    """Statuses, messages and points are those of the same bug graded without the game; the game does act: the
    root cause the honest bug gets is gone."""
    import json
    from grader.judge import Options, grade_bytes
    from grader.sandbox import Limits
    from tests.sandbox.support import Recorder
    honest = graded("split_no_transpose_lm")
    recorder = Recorder("process")  # to read what left the diagnosis run's sandbox
    gamed = grade_bytes((bugs.source("split_no_transpose_lm") + GAME).encode(), "submission.py",
                        Options(only=ONLY, limits=Limits(stage_s=30.0)), sandbox=recorder)
    assert root_causes(honest) and root_causes(gamed) != root_causes(honest), \
        f"the game did not change the diagnosis, so it never ran: {root_causes(gamed)}"
    sent = [json.dumps(header) for run in recorder.runs for header, _ in run.frames]
    assert any('"gamed"' in h for h in sent), "the game's forged result never left the sandbox: it did not act"
    assert results_but_root_causes(gamed) == results_but_root_causes(honest), explain(gamed)
    assert "GAMED" not in str(gamed["checks"]), explain(gamed)
    course = current_rubric()  # the course rubric, as the service scores with it
    assert score(gamed, course)["total"] == score(honest, course)["total"] < course.total
