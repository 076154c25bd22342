"""Exports: the CSV gradebook reads back into the same numbers; Gradescope's results.json has its fields."""
import csv
import io
import json
import math

from rubric import apply_late_penalty, gradebook_csv, gradescope_results, parse_rubric, score
from tests.rubric.reports import make_report

REGISTRY = {"grad": ("parameters", "without_gradient"), "causal": ()}
RUBRIC = parse_rubric('''
version = "e.1"
total = 20
[[categories]]
id = "correctness"
title = "Correctness"
weight = 10
[[categories.items]]
id = "grad"
check = "grad"
title = "Gradients"
points = 7
partial = [{metric = "without_gradient", per = "parameters", full = 0, zero = 1}]
[[categories.items]]
id = "causal"
check = "causal"
points = 3
[[categories]]
id = "honesty"
weight = 10
visibility = "hidden"
[[categories.items]]
id = "limits"
points = 10
description = "limits stated"
''', "t", checks=REGISTRY)


def scored(without: int, causal: str, manual=None) -> dict:
    """A score with awkward fractions: grad earns 7 * (1 - without/3)."""
    report = make_report({"grad": "fail" if without else "pass", "causal": causal},
                         {"grad": {"parameters": 3, "without_gradient": without}})
    return score(report, RUBRIC, manual)


ROWS = [
    {"student": "ada", "score": scored(0, "pass", {"limits": {"points": 9.5}})},
    {"student": "bob", "score": apply_late_penalty(scored(1, "pass", {"limits": 1 / 3}), 0.1)},
    {"student": "=cmd|' /C calc'!A0", "score": scored(2, "timeout")},
    {"student": "dan", "score": None},  # nothing counted yet
]


def read_back(text: str) -> list[dict]:
    """The CSV as dicts, through the csv module."""
    return list(csv.DictReader(io.StringIO(text)))


def test_gradebook_has_a_row_per_student_and_a_column_per_category():
    rows = read_back(gradebook_csv(ROWS))
    assert list(rows[0]) == ["student", "name", "email", "state", "submission", "submitted_at", "correctness",
                             "honesty", "late_penalty_fraction", "late_penalty", "total", "max", "pending_manual",
                             "rubric_version"], list(rows[0])
    assert [r["student"] for r in rows] == ["ada", "bob", "'=cmd|' /C calc'!A0", "dan"], \
        "one row per student; a cell that a spreadsheet would run as a formula is defused"


def test_gradebook_numbers_read_back_exactly():
    for row, original in zip(read_back(gradebook_csv(ROWS)), ROWS):
        s = original["score"]
        if s is None:
            assert row["total"] == row["correctness"] == "", "no score, empty cells"
            continue
        for cat in s["categories"]:
            assert float(row[cat["id"]]) == cat["points"], f"{original['student']} {cat['id']}"
        assert float(row["total"]) == s["total"] and float(row["max"]) == s["max"]
        assert float(row["late_penalty"]) == s.get("late_penalty", {}).get("points", 0.0)
        assert float(row["late_penalty_fraction"]) == s.get("late_penalty", {}).get("fraction", 0.0)
        assert int(row["pending_manual"]) == len(s["pending_manual"]) and row["rubric_version"] == "e.1"


def test_gradebook_totals_add_up_after_the_penalty():
    bob = read_back(gradebook_csv(ROWS))[1]
    raw = float(bob["correctness"]) + float(bob["honesty"])
    assert math.isclose(raw - float(bob["late_penalty"]), float(bob["total"]), abs_tol=1e-9), bob


def test_gradebook_names_the_student_and_the_counted_submission():
    from datetime import datetime
    rows = read_back(gradebook_csv([{"student": "ada", "name": "Ada L", "email": "ada@example.edu", "state": "inactive",
                                     "submission": 12, "submitted_at": datetime(2026, 12, 1, 9, 30),
                                     "score": ROWS[1]["score"]},
                                    {"student": "dan", "name": "=HYPERLINK()", "score": None}]))
    ada, dan = rows
    assert (ada["name"], ada["email"], ada["state"], ada["submission"], ada["submitted_at"]) == \
        ("Ada L", "ada@example.edu", "inactive", "12", "2026-12-01T09:30:00Z"), ada
    assert float(ada["late_penalty_fraction"]) == 0.1 and float(ada["late_penalty"]) > 0, ada
    assert dan["name"] == "'=HYPERLINK()" and dan["submission"] == dan["late_penalty_fraction"] == "", \
        "a name is defused like the id; nothing counted leaves the submission and the penalty empty"


def test_gradescope_results_have_the_specified_fields():
    report = make_report({"grad": "fail", "causal": "pass"}, {"grad": {"parameters": 3, "without_gradient": 1}})
    results = gradescope_results(report, score(report, RUBRIC))
    assert {"score", "tests", "output", "visibility", "execution_time"} <= set(results)
    assert [t["name"] for t in results["tests"]] == ["Correctness: Gradients", "Correctness: causal"], \
        "a test per automatic item; the pending manual item is graded in Gradescope itself"
    for test in results["tests"]:
        assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(test), test
        assert test["status"] in ("passed", "failed") and test["visibility"] in ("visible", "after_published")
        assert isinstance(test["score"], float) and isinstance(test["output"], str)
    grad = results["tests"][0]
    assert (grad["score"], grad["max_score"], grad["status"]) == (4.67, 7.0, "failed"), grad
    assert "grad fail" in grad["output"], "the output carries the check's own message"
    assert results["score"] == sum(t["score"] for t in results["tests"])
    assert json.loads(json.dumps(results)) == results


def test_gradescope_includes_graded_manual_items_with_their_visibility():
    results = gradescope_results(make_report({}), scored(0, "pass", {"limits": {"points": 8, "comment": "fine"}}))
    limits = results["tests"][-1]
    assert (limits["score"], limits["visibility"], limits["output"]) == (8.0, "after_published", "fine"), limits

