"""`grader assignment create | update | extend | show | list` end to end on a SQLite instance (click's CliRunner)."""
import json

import pytest

from tests.support.rubrics import SMALL_RUBRIC


@pytest.fixture
def grader(local_cli):
    """Run `grader ...` against a fresh SQLite instance with the student dana; returns (exit code, output)."""
    assert local_cli("roster", "add", "dana")[0] == 0
    return local_cli


def shown(grader, slug="cap") -> dict:
    code, out = grader("assignment", "show", slug, "--json")
    assert code == 0, out
    return json.loads(out)


def test_create_with_every_rule_then_show_them(grader):
    code, out = grader("assignment", "create", "cap", "--title", "Capstone", "--checks", "split_heads,rope",
                       "--opens", "2026-12-01T09:00:00+01:00", "--due", "2026-12-20T23:59:00Z", "--grace", 30,
                       "--late-per-day", 0.2, "--late-max", 0.6, "--attempts", 5, "--period", "week",
                       "--counts", "chosen", "--state", "draft", "--timezone", "Europe/Berlin")
    assert code == 0 and "created assignment cap" in out, out
    d = shown(grader)
    assert (d["state"], d["opens_at"], d["due_at"]) == ("draft", "2026-12-01T08:00Z", "2026-12-20T23:59Z")
    assert (d["grace_minutes"], d["late_penalty_per_day"], d["late_penalty_max"]) == (30.0, 0.2, 0.6)
    assert (d["attempts_per_period"], d["period"], d["counts"], d["timezone"]) == (5, "week", "chosen",
                                                                                   "Europe/Berlin")
    assert d["checks"] == ["split_heads", "rope"] and d["rubric"] == "2026-11-29.1 (packaged)"
    code, out = grader("assignment", "show", "cap")
    assert code == 0 and "counts                chosen" in out and "due_at                2026-12-20T23:59Z" in out


def test_update_changes_only_the_given_options(grader):
    grader("assignment", "create", "cap", "--counts", "latest", "--attempts", 3)
    code, out = grader("assignment", "update", "cap", "--due", "2027-01-05T12:00:00Z")
    assert code == 0 and "updated assignment cap; rescored 0 results" in out, out
    d = shown(grader)
    assert (d["due_at"], d["counts"], d["attempts_per_period"]) == ("2027-01-05T12:00Z", "latest", 3)
    code, out = grader("assignment", "update", "cap")
    assert code == 2 and "nothing to change" in out


def test_a_rubric_file_is_validated_stored_and_pinned(grader, tmp_path):
    good, bad = tmp_path / "small.toml", tmp_path / "bad.toml"
    good.write_text(SMALL_RUBRIC)
    bad.write_text(SMALL_RUBRIC.replace("points = 2", 'points = "two"'))
    item_line = bad.read_text().splitlines().index('id = "causal"') + 1  # a problem is placed at its item's id
    code, out = grader("assignment", "create", "cap", "--rubric", bad)
    assert code == 1 and f'bad.toml, line {item_line}, category "correct", item "causal": "points" must be a ' \
        "number" in out, out
    assert grader("assignment", "show", "cap")[0] == 1, "a refused create makes no assignment"
    assert grader("assignment", "create", "cap", "--rubric", good)[0] == 0
    assert shown(grader)["rubric"].startswith("t.1 (stored id ")
    assert grader("assignment", "update", "cap", "--packaged-rubric")[0] == 0
    assert shown(grader)["rubric"] == "2026-11-29.1 (packaged)"


@pytest.mark.parametrize("args,code,says", [
    (("--due", "2026-12-20T23:59"), 1, "has no time zone"),
    (("--opens", "tomorrow"), 1, "ISO 8601"),
    (("--late-per-day", 2), 1, "fraction from 0 to 1"),
    (("--attempts", -1), 1, "whole number"),
    (("--counts", "median"), 2, "'median' is not one of"),
    (("--state", "hidden"), 2, "'hidden' is not one of"),
    (("--timezone", "Mars/Olympus"), 1, "IANA name"),
    (("--checks", "nope"), 1, "unknown check id nope"),
])
def test_a_bad_value_is_one_clear_line_and_a_nonzero_exit(grader, args, code, says):
    got, out = grader("assignment", "create", "cap", *args)
    assert got == code and says in out, out
    assert "Traceback" not in out


def test_extend_gives_and_removes_a_students_extension(grader):
    grader("assignment", "create", "cap", "--due", "2026-12-20T23:59:00Z")
    code, out = grader("assignment", "extend", "cap", "dana", "--until", "2026-12-23T23:59:00Z",
                       "--extra-attempts", 2, "--reason", "ill")
    assert code == 0 and "extended dana on cap" in out, out
    assert shown(grader)["extensions"] == [{"student": "dana", "until": "2026-12-23T23:59Z", "extra_attempts": 2,
                                             "reason": "ill"}]
    code, out = grader("assignment", "show", "cap")
    assert "dana: until 2026-12-23T23:59Z, +2 attempts (ill)" in out
    assert grader("assignment", "extend", "cap", "nobody", "--until", "2026-12-23T23:59:00Z")[0] == 1
    code, out = grader("assignment", "extend", "cap", "dana", "--until", "2026-12-23")
    assert code == 1 and "has no time zone" in out
    assert grader("assignment", "extend", "cap", "dana", "--remove")[0] == 0
    assert shown(grader)["extensions"] == []
    code, out = grader("assignment", "extend", "cap", "dana", "--remove")
    assert code == 1 and "dana has no extension" in out


def test_list_hides_archived_assignments_unless_asked(grader):
    grader("assignment", "create", "cap", "--counts", "best")
    grader("assignment", "create", "old", "--state", "archived")
    code, out = grader("assignment", "list")
    assert code == 0 and [line.split("\t")[:2] for line in out.splitlines()] == [["cap", "open"]]
    code, out = grader("assignment", "list", "--all")
    assert [line.split("\t")[0] for line in out.splitlines()] == ["cap", "old"]
