"""First verdicts while training runs (grader/live.py): the judge sends each check's verdict through on_event as soon
as it is final, every check exactly once, each one equal to the report's entry, in a report that is the same as
without on_event."""
import time

import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits
from tests.feedback import bugs
from tests.support.grading import REFERENCES, explain, grade_text

pytestmark = pytest.mark.slow

LATE = {"training", "evaluation"}  # the checks that need the judge's training run


def graded_live(text: str, only=()) -> tuple[dict, list]:
    """The report and every event, each with the seconds since grading began."""
    events, started = [], time.monotonic()
    report = grade_bytes(text.encode(), "submission.py", Options(only=tuple(only), limits=Limits(stage_s=30.0)),
                         on_event=lambda e: events.append((round(time.monotonic() - started, 3), e)))
    return report, events


def verdicts(events) -> list[dict]:
    return [e["check"] for _, e in events if e.get("type") == "verdict"]


def without_times(check: dict) -> dict:
    return {k: v for k, v in check.items() if k != "duration_s"}


def test_each_verdict_is_sent_once_and_equals_the_report_entry_and_comes_before_training_ends():
    report, events = graded_live(REFERENCES["lm"].read_text())
    sent = verdicts(events)
    assert sorted(c["id"] for c in sent) == sorted(c["id"] for c in report["checks"]), "every check exactly once"
    final = {c["id"]: c for c in report["checks"]}
    for check in sent:
        assert check == final[check["id"]], f"the verdict sent for {check['id']} differs from the report's"
    ended = next(t for t, e in events if e.get("type") == "stage_end" and e.get("stage") == "training.run")
    early = {e["check"]["id"]: t for t, e in events if e.get("type") == "verdict" and t < ended}
    assert set(early) == set(final) - LATE, (f"the correctness verdicts come before the training run ends "
                                            f"({ended:.1f} s): {early}")
    print(f"correctness verdicts by {max(early.values()):.2f} s, training run ended at {ended:.2f} s, "
          f"report at {report['timings']['total_s']:.2f} s")
    same = grade_text(REFERENCES["lm"].read_text())
    assert [without_times(c) for c in report["checks"]] == [without_times(c) for c in same["checks"]], \
        "the report with on_event equals the one without: " + explain(report)


@pytest.mark.parametrize("name", ["split_no_transpose_lm", "rope_and_padding_inverted_lm"])
def test_a_verdict_that_a_root_cause_may_change_is_sent_only_at_the_end(name):
    only = ("split_heads", "attention_sdpa", "rope", "causality", "padding", "kv_cache")
    report, events = graded_live(bugs.source(name), only=only)
    sent = verdicts(events)
    final = {c["id"]: c for c in report["checks"]}
    assert [c["id"] for c in sent] != [] and sorted(c["id"] for c in sent) == sorted(final)
    for check in sent:
        assert check == final[check["id"]], f"the verdict sent for {check['id']} differs from the report's"
    caused = [c["id"] for c in report["checks"] if "root_cause" in c]
    assert caused, "this submission's model-level failures have a root cause: " + explain(report)
    last_stage = max(i for i, (_, e) in enumerate(events) if e.get("type") == "stage_end")
    for i, (_, e) in enumerate(events):
        if e.get("type") == "verdict" and e["check"]["id"] in caused:
            assert i > last_stage, f"{e['check']['id']} was sent before the diagnosis could name its root cause"


def test_a_submission_without_track_sends_its_errors_too():
    text = REFERENCES["lm"].read_text().replace('TRACK = "lm"', 'TRACK = "nope"')
    report, events = graded_live(text, only=("split_heads", "causality"))
    assert sorted(c["id"] for c in verdicts(events)) == ["causality", "split_heads"]
    assert {c["id"]: c["status"] for c in verdicts(events)}["causality"] == "error", explain(report)
