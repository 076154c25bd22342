"""Scoring: every status, missing checks, partial credit, manual items, rounding, and the student's view."""
import copy
import json
import math

import pytest

from rubric import apply_late_penalty, parse_rubric, score, student_view
from tests.rubric.reports import make_report
from rubric.points import add_points, round_points

# A stand-in registry: these tests are about scoring, not about which checks exist today.
REGISTRY = {"grad": ("parameters", "without_gradient"), "causal": (), "train": ("loss_ratio",),
            "eval": ("token_accuracy", "exact_match", "ppl_ratio")}
TEXT = '''
version = "s.1"
total = 30

[[categories]]
id = "auto"
weight = 20

[[categories.items]]
id = "grad"
check = "grad"
points = 4
fail_cap = 0.75
partial = [{metric = "without_gradient", per = "parameters", full = 0, zero = 1}]

[[categories.items]]
id = "causal"
check = "causal"
points = 3

[[categories.items]]
id = "train"
check = "train"
points = 6
fail_cap = 0.5
partial = [{metric = "loss_ratio", full = 0.8, zero = 1.0}]

[[categories.items]]
id = "eval"
check = "eval"
points = 7
partial = [
  {track = "reverse", metric = "token_accuracy", full = 0.9, zero = 0.1},
  {track = "reverse", metric = "exact_match", full = 0.5, zero = 0.0},
  {track = "lm", metric = "ppl_ratio", full = 0.7, zero = 1.0},
]

[[categories]]
id = "written"
weight = 10
visibility = "hidden"

[[categories.items]]
id = "report"
points = 7
description = "the report"

[[categories.items]]
id = "limits"
points = 3
visibility = "visible"
description = "the limits"
'''
RUBRIC = parse_rubric(TEXT, "test", checks=REGISTRY)
OTHER_STATUSES = ["error", "timeout", "oom", "crash", "skipped"]


def item(scored: dict, item_id: str) -> dict:
    """One item row of a score."""
    return next(i for c in scored["categories"] for i in c["items"] if i["id"] == item_id)


def one(check: str, status: str, metrics=None, track="lm", manual=None) -> dict:
    """The item row scoring a report that has only this check."""
    report = make_report({check: status}, {check: metrics or {}}, track)
    return item(score(report, RUBRIC, manual), check)


@pytest.mark.parametrize("status, points", [("pass", 3.0), ("fail", 0.0)] + [(s, 0.0) for s in OTHER_STATUSES])
def test_every_status_without_partial_credit(status, points):
    row = one("causal", status)
    assert row["points"] == points and row["status"] == status, f"{status}: {row}"
    assert row["note"], "every item explains its points"


def test_a_missing_check_scores_zero_and_says_so():
    row = item(score(make_report({}), RUBRIC), "causal")
    assert (row["points"], row["status"]) == (0.0, "missing") and "no result" in row["note"], row


def test_an_unknown_status_scores_zero():
    row = one("causal", "exploded")
    assert row["points"] == 0.0 and "unknown status" in row["note"], row


def test_a_report_without_checks_scores_zero_everywhere():
    scored = score({}, RUBRIC)
    assert scored["total"] == 0.0 and all(i["status"] in ("missing", "pending")
                                          for c in scored["categories"] for i in c["items"])


GRAD = [
    # status, metrics, points: credit = fraction of parameters with a gradient, at most 75% on fail
    ("pass", {"parameters": 10, "without_gradient": 0}, 4.0),
    ("pass", {}, 4.0),  # a pass without the metrics earns the rule in full
    ("fail", {"parameters": 10, "without_gradient": 1}, 3.0),  # 90% capped at 75%
    ("fail", {"parameters": 10, "without_gradient": 5}, 2.0),
    ("fail", {"parameters": 3, "without_gradient": 2}, 1.33),  # 4/3 rounded half up
    ("fail", {"parameters": 10, "without_gradient": 10}, 0.0),
    ("fail", {}, 0.0),  # a fail without the metrics earns nothing
    ("fail", {"parameters": 0, "without_gradient": 0}, 0.0),  # no parameters: no fraction
    ("fail", {"parameters": 10, "without_gradient": math.nan}, 0.0),
    ("fail", {"parameters": 10, "without_gradient": "1"}, 0.0),
    ("fail", {"parameters": 10, "without_gradient": True}, 0.0),
] + [(s, {"parameters": 10, "without_gradient": 0}, 0.0) for s in OTHER_STATUSES]  # metrics are not trusted then


@pytest.mark.parametrize("status, metrics, points", GRAD)
def test_gradient_path_partial_credit(status, metrics, points):
    row = one("grad", status, metrics)
    assert row["points"] == points, f"{status} {metrics}: got {row['points']}, expected {points} ({row['note']})"


@pytest.mark.parametrize("status, ratio, points", [
    ("pass", 0.5, 6.0), ("pass", 0.8, 6.0), ("pass", 0.9, 3.0), ("pass", 0.95, 1.5), ("pass", 1.0, 0.0),
    ("pass", 1.3, 0.0), ("fail", 0.5, 3.0), ("fail", 0.95, 1.5), ("fail", 1.2, 0.0),
])
def test_training_thresholds_interpolate_linearly(status, ratio, points):
    row = one("train", status, {"loss_ratio": ratio})
    assert row["points"] == points, f"loss_ratio {ratio} ({status}): {row['points']} != {points}; {row['note']}"
    assert "loss_ratio = " in row["note"], row["note"]


@pytest.mark.parametrize("track, metrics, points", [
    ("reverse", {"token_accuracy": 0.5, "exact_match": 0.25}, 3.5),  # both rules at 50%
    ("reverse", {"token_accuracy": 0.9, "exact_match": 0.0}, 3.5),  # rules averaged, equal weights
    ("reverse", {"token_accuracy": 1.0, "exact_match": 0.9, "ppl_ratio": 5.0}, 7.0),  # lm rule ignored
    ("lm", {"ppl_ratio": 0.85}, 3.5),
    ("lm", {"ppl_ratio": 0.85, "token_accuracy": 0.0}, 3.5),  # reverse rules ignored
])
def test_evaluation_rules_apply_to_their_track(track, metrics, points):
    row = one("eval", "pass", metrics, track)
    assert row["points"] == points, f"{track} {metrics}: {row['points']} != {points}; {row['note']}"


def test_manual_items_not_yet_graded_count_zero_and_are_listed():
    scored = score(make_report({"causal": "pass"}), RUBRIC)
    assert scored["pending_manual"] == ["report", "limits"], scored["pending_manual"]
    assert item(scored, "report")["points"] == 0.0 and item(scored, "report")["status"] == "pending"


@pytest.mark.parametrize("grade, points, note", [
    ({"points": 5, "comment": "good"}, 5.0, "good"),
    ({"points": 6.666}, 6.67, ""),
    (4.5, 4.5, ""),  # a bare number is accepted
    ({"points": 9, "comment": "great"}, 7.0, "great (9 kept within 0-7)"),  # e.g. the rubric lowered the max
    ({"points": -1}, 0.0, "(-1 kept within 0-7)"),
])
def test_manual_grades(grade, points, note):
    scored = score(make_report({}), RUBRIC, {"report": grade})
    row = item(scored, "report")
    assert (row["points"], row["status"], row["note"]) == (points, "graded", note), row
    assert "report" not in scored["pending_manual"]


@pytest.mark.parametrize("grade", [{"points": "five"}, {"comment": "no points"}, "x", {"points": math.inf}])
def test_malformed_manual_grade_is_an_error(grade):
    with pytest.raises(ValueError, match="needs numeric points"):
        score(make_report({}), RUBRIC, {"report": grade})


def test_manual_grades_for_unknown_items_are_kept_aside():
    scored = score(make_report({}), RUBRIC, {"removed_item": {"points": 2}})
    assert scored["unused_manual"] == ["removed_item"] and scored["total"] == 0.0, scored


def test_instructor_override_of_an_automatic_item():
    row = one("causal", "fail", manual={"causal": {"points": 2, "comment": "regrade: mask built correctly"}})
    assert (row["points"], row["override"], row["status"]) == (2.0, True, "fail"), row
    assert row["note"] == "set by the instructor (automatic: 0): regrade: mask built correctly", row["note"]


@pytest.mark.parametrize("value, decimals, expected", [
    (2.675, 2, 2.68), (0.125, 2, 0.13), (1.005, 2, 1.01), (0.5, 0, 1.0), (2.5, 0, 3.0), (4 / 3, 2, 1.33),
    (-0.125, 2, -0.13),
])
def test_points_round_half_up_from_the_decimal_form(value, decimals, expected):
    assert round_points(value, decimals) == expected, f"{value} to {decimals} decimals"


def test_totals_are_exact_sums_of_what_is_shown():
    report = make_report({"grad": "fail", "causal": "pass", "train": "pass", "eval": "pass"},
                         {"grad": {"parameters": 3, "without_gradient": 2}, "train": {"loss_ratio": 0.9333},
                          "eval": {"ppl_ratio": 0.7777}})
    scored = score(report, RUBRIC, {"report": 1 / 3, "limits": 0.1})
    for cat in scored["categories"]:
        assert cat["points"] == add_points([i["points"] for i in cat["items"]], 2), cat["id"]
        assert cat["max"] == sum(i["max"] for i in cat["items"])
    assert scored["total"] == add_points([c["points"] for c in scored["categories"]], 2)
    assert scored["max"] == 30.0 and scored["decimals"] == 2
    assert all(i["points"] == round(i["points"], 2) for c in scored["categories"] for i in c["items"])


def test_score_is_pure_and_json_ready():
    report = make_report({"grad": "fail", "causal": "pass"}, {"grad": {"parameters": 4, "without_gradient": 1}})
    manual = {"report": {"points": 3, "comment": "ok"}}
    frozen = copy.deepcopy((report, manual))
    first = score(report, RUBRIC, manual)
    assert (report, manual) == frozen, "score must not modify its inputs"
    assert score(report, RUBRIC, manual) == first, "same inputs, same score"
    assert json.loads(json.dumps(first, allow_nan=False)) == first
    assert {"rubric_version", "total", "max", "categories", "pending_manual"} <= set(first)
    for row in (i for c in first["categories"] for i in c["items"]):
        assert {"id", "kind", "points", "max", "status", "visible", "note"} <= set(row), row


def test_a_new_rubric_version_rescores_the_same_report():
    report = make_report({"grad": "pass", "causal": "pass", "train": "pass", "eval": "pass"},
                         {"train": {"loss_ratio": 0.9}, "eval": {"ppl_ratio": 0.7}})
    changed = parse_rubric(TEXT.replace('version = "s.1"', 'version = "s.2"')
                           .replace("full = 0.8, zero = 1.0", "full = 0.9, zero = 1.0"), "test", checks=REGISTRY)
    before, after = score(report, RUBRIC), score(report, changed)
    assert (before["rubric_version"], after["rubric_version"]) == ("s.1", "s.2")
    assert (item(before, "train")["points"], item(after, "train")["points"]) == (3.0, 6.0)
    assert after["total"] - before["total"] == 3.0


def test_student_view_hides_unreleased_hidden_items():
    scored = score(make_report({"causal": "pass"}), RUBRIC, {"report": 5, "limits": 2})
    view = student_view(scored, RUBRIC)
    shown = [i["id"] for c in view["categories"] for i in c["items"]]
    assert "report" not in shown and "limits" in shown, shown
    assert view["hidden"] == {"items": 1, "max": 7.0} and view["total"] == 5.0 and view["max"] == 23.0, view
    assert "unused_manual" not in view
    released = student_view(scored, RUBRIC, released={"written"})
    assert released["total"] == scored["total"] == 10.0 and released["hidden"]["items"] == 0, released
    by_item = student_view(scored, RUBRIC, released={"report"})
    assert by_item["hidden"]["items"] == 0


def test_student_view_without_a_rubric_uses_the_visibility_recorded_in_the_score():
    scored = score(make_report({}), RUBRIC)
    assert student_view(scored)["hidden"]["items"] == 1


def test_student_view_takes_the_late_penalty_from_what_is_shown():
    scored = apply_late_penalty(score(make_report({"causal": "pass"}), RUBRIC, {"report": 7, "limits": 3}), 0.5)
    assert scored["total"] == 6.5 and scored["total_before_penalty"] == 13.0
    view = student_view(scored, RUBRIC)
    assert view["total_before_penalty"] == 6.0 and view["total"] == 3.0, view
