"""Regrades and rescoring: the score before and after, item by item, with no student code run."""
import pytest

from rubric import diff_scores, diff_totals, parse_rubric, score
from tests.rubric.reports import make_report, rescore

REGISTRY = {"a": (), "b": ("ratio",)}
V1 = '''
version = "d.1"
total = 10
[[categories]]
id = "auto"
weight = 6
[[categories.items]]
id = "a"
check = "a"
points = 3
[[categories.items]]
id = "b"
check = "b"
points = 3
partial = [{metric = "ratio", full = 0.5, zero = 1.0}]
[[categories]]
id = "manual"
weight = 4
[[categories.items]]
id = "m"
points = 4
description = "by hand"
'''
# version 2 moves a point from "a" to "b", relaxes b's threshold and splits the manual item
V2 = (V1.replace('version = "d.1"', 'version = "d.2"').replace("points = 3\n[[categories.items]]\nid = \"b\"",
                                                             "points = 2\n[[categories.items]]\nid = \"b\"")
      .replace("check = \"b\"\npoints = 3", "check = \"b\"\npoints = 4").replace("full = 0.5", "full = 0.75")
      .replace('id = "m"\npoints = 4', 'id = "m2"\npoints = 4'))
REPORT = make_report({"a": "pass", "b": "pass"}, {"b": {"ratio": 0.75}})


@pytest.fixture(scope="module")
def rubrics():
    return parse_rubric(V1, "v1", checks=REGISTRY), parse_rubric(V2, "v2", checks=REGISTRY)


def rows_by_id(rows):
    return {r["id"]: r for r in rows}


def test_rescore_shows_every_item_before_and_after(rubrics):
    v1, v2 = rubrics
    before, after = score(REPORT, v1, {"m": 3}), score(REPORT, v2, {"m": 3})
    rows = rows_by_id(diff_scores(before, after))
    assert list(rows) == ["a", "b", "m2", "m"], "after's order, then items the new rubric removed"
    assert (rows["a"]["before"], rows["a"]["after"], rows["a"]["max_after"]) == (3.0, 2.0, 2.0), rows["a"]
    assert (rows["b"]["before"], rows["b"]["after"], rows["b"]["delta"]) == (1.5, 4.0, 2.5), rows["b"]
    assert (rows["m"]["after"], rows["m2"]["before"], rows["m2"]["status_after"]) == (None, None, "pending")
    assert all(r["changed"] for r in rows.values())
    totals = diff_totals(before, after)
    assert totals == {"before": 7.5, "after": 6.0, "delta": -1.5, "version_before": "d.1", "version_after": "d.2"}


def test_a_regrade_lists_only_what_changed_as_changed(rubrics):
    v1, _ = rubrics
    before = score(REPORT, v1)
    after = score(REPORT, v1, {"m": {"points": 4, "comment": "regrade"}})
    changed = [r["id"] for r in diff_scores(before, after) if r["changed"]]
    assert changed == ["m"], changed


def test_first_score_has_nothing_before(rubrics):
    v1, _ = rubrics
    rows = diff_scores(None, score(REPORT, v1))
    assert all(r["before"] is None and r["after"] is not None for r in rows)


def test_rescore_many_stored_results_without_running_code(rubrics):
    v1, v2 = rubrics
    stored = [{"id": n, "report": make_report({"a": "pass", "b": s}, {"b": {"ratio": 0.75}}), "manual": {"m": 2}}
              for n, s in enumerate(["pass", "fail", "timeout"])]
    for rec in stored:
        rec["score"] = score(rec["report"], v1, rec["manual"])
    results = rescore(stored, v2)
    assert [r["id"] for r in results] == [0, 1, 2]
    assert all(r["score"]["rubric_version"] == "d.2" for r in results), "every new score records its version"
    assert {c["id"] for c in results[0]["changes"]} == {"a", "b", "m", "m2"}, results[0]["changes"]
    assert results[2]["totals"]["after"] == 2.0, "timeout: only item a (2 points) remains"
