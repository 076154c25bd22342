"""Calibration: under the packaged rubric, each reference solution earns every automatic point."""
import pytest

from grader.registry import check_registry
from rubric import RubricError, load_rubric, score
from tests.support.grading import REFERENCES, grade_text


def packaged_rubric():
    """The packaged rubric; every check it names exists now, so failing to load it is a defect."""
    try:
        return load_rubric(checks=check_registry())
    except RubricError as exc:
        pytest.fail(f"the packaged rubric does not load: {exc}")


@pytest.mark.slow
@pytest.mark.parametrize("track", ["reverse", "lm"])
def test_reference_earns_every_automatic_point(track):
    rubric = packaged_rubric()
    scored = score(grade_text(REFERENCES[track].read_text()), rubric)
    short = [(i["id"], i["points"], i["max"], i["note"]) for c in scored["categories"] for i in c["items"]
             if i["kind"] == "auto" and i["points"] < i["max"]]
    assert not short, f"the {track} reference loses automatic points: {short}"
    manual = sum(i.points for _, i in rubric.items() if i.kind == "manual")
    assert scored["total"] == rubric.total - manual, "everything but the pending manual items"
    assert len(scored["pending_manual"]) == sum(1 for _, i in rubric.items() if i.kind == "manual")
