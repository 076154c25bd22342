"""`grader check` with a rubric: points next to each check, a score in --json, and a clear error for a bad rubric."""
import json
import subprocess
import sys
import tomllib

import pytest
from click.testing import CliRunner

import grader.cli
import grader.judge
from rubric import DEFAULT_PATH
from tests.rubric.reports import make_report
from tests.support.rubrics import SMALL_RUBRIC

ROOT = DEFAULT_PATH.parents[1]
SUBMISSION = str(ROOT / "submissions" / "reference_lm.py")
RUBRIC = SMALL_RUBRIC
REPORT = make_report({"gradient_path": "fail", "causality": "pass", "rope": "pass"},
                     {"gradient_path": {"parameters": 8, "without_gradient": 4, "nonfinite": 0, "all_zero": 0}})


@pytest.fixture
def cli(monkeypatch, tmp_path):
    """Run `grader check` in-process on a fixed report (no sandbox), with the test rubric at tmp_path/r.toml."""
    monkeypatch.setattr(grader.judge, "grade_file", lambda path, options, on_event=None, **_: json.loads(json.dumps(REPORT)))
    (tmp_path / "r.toml").write_text(RUBRIC)
    return lambda *args: CliRunner().invoke(grader.cli.main, ["check", SUBMISSION, *args])


def test_table_shows_points_next_to_each_check(cli, tmp_path):
    result = cli("--rubric", str(tmp_path / "r.toml"))
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("  ")}
    assert "2.00/4" in lines["gradient_path"], "half the parameters: 50% of 4 points"
    assert "2.00/2" in lines["causality"]
    assert " - " in lines["rope"] and "/" not in lines["rope"].split("pass")[1][:20], "no rubric item draws on rope"
    head = "rubric t.1: 4 of 10 points so far; 1 manual item not graded yet (4 points)"
    assert head in result.stdout, result.stdout
    assert "manual pending: written" in result.stdout


def test_json_keeps_the_report_and_adds_the_score(cli, tmp_path):
    result = cli("--rubric", str(tmp_path / "r.toml"), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {k: v for k, v in doc.items() if k != "score"} == REPORT, "existing keys unchanged"
    assert doc["score"]["rubric_version"] == "t.1" and doc["score"]["total"] == 4.0, doc["score"]
    assert doc["score"]["pending_manual"] == ["written"]


@pytest.mark.parametrize("text, fragment", [
    (RUBRIC.replace('check = "causality"', 'check = "causal"'), 'unknown check id "causal"'),
    (RUBRIC.replace("points = 4\ndescription", "points = 5\ndescription"), "item points sum to 5"),
    ("total = [", "not valid TOML"),
])
def test_invalid_rubric_is_a_usage_error(cli, tmp_path, text, fragment):
    (tmp_path / "bad.toml").write_text(text)
    result = cli("--rubric", str(tmp_path / "bad.toml"))
    assert result.exit_code == 2 and fragment in result.stderr, (result.exit_code, result.output)


def test_missing_rubric_file_is_a_usage_error(cli, tmp_path):
    result = cli("--rubric", str(tmp_path / "absent.toml"))
    assert result.exit_code == 2 and "does not exist" in result.stderr, result.output


def test_default_rubric_scores(cli):
    """Without --rubric, the packaged rubric scores the report."""
    doc = tomllib.loads(DEFAULT_PATH.read_text())
    result = cli("--json")
    assert result.exit_code == 0, result.output
    scored = json.loads(result.stdout)["score"]
    assert scored["rubric_version"] == doc["version"] and scored["max"] == 100.0, result.stderr


@pytest.mark.slow
def test_real_run_with_a_rubric(tmp_path):
    (tmp_path / "r.toml").write_text(RUBRIC)
    proc = subprocess.run([sys.executable, "-m", "grader", "check", SUBMISSION, "--only", "gradient_path,causality",
                           "--rubric", str(tmp_path / "r.toml"), "--json"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [c["status"] for c in doc["checks"]] == ["pass", "pass"], doc["checks"]
    assert doc["score"]["total"] == 6.0, "the reference earns every automatic point; the manual item is pending"
