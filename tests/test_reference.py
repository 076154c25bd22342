"""The reference solutions pass every check, and grading is deterministic."""
import json

import pytest

from tests.cli.cli_helpers import run
from tests.support.grading import REFERENCES, explain, grade_text, statuses
from grader.checks import ALL_IDS

pytestmark = pytest.mark.slow


def strip_timings(report):
    """The report without the fields that are wall-clock measurements."""
    report = {k: v for k, v in report.items() if k != "timings"}
    report["checks"] = [{k: v for k, v in c.items() if k != "duration_s"} for c in report["checks"]]
    return report


@pytest.mark.parametrize("track", sorted(REFERENCES))
def test_reference_passes_every_check(track):
    report = grade_text(REFERENCES[track].read_text())
    assert report["submission"]["track"] == track
    assert set(statuses(report)) == set(ALL_IDS), "every contract check is reported"
    assert set(statuses(report).values()) == {"pass"}, explain(report)


def test_same_file_twice_gives_identical_json_apart_from_timings():
    from grader.judge import grade_file
    first, second = grade_file(REFERENCES["lm"]), grade_file(REFERENCES["lm"])
    assert strip_timings(first) == strip_timings(second)


def checked_elsewhere(path, hash_seed: str, fork: str, *args) -> list:
    """The checks of `grader check PATH --json` in an interpreter of its own, with that hash seed, its sandboxes forked
    from a fork server of its own or started (GRADER_SANDBOX_FORK), timings left out."""
    ran = run("check", path, "--json", *args, env={"PYTHONHASHSEED": hash_seed, "GRADER_SANDBOX_FORK": fork},
              timeout=600)
    assert ran.code in (0, 1), ran.err[-2000:]
    return strip_timings(json.loads(ran.out))["checks"]


def test_other_interpreters_with_other_hash_seeds_give_the_same_verdicts():
    """The same file through `grader check` in two interpreters (other hash seeds; one sandbox forked from the fork
    server, one started) gets the same verdicts, metrics and messages: nothing hangs on one process's state."""
    first, second = checked_elsewhere(REFERENCES["lm"], "1", "true"), checked_elsewhere(REFERENCES["lm"], "2", "false")
    assert len(first) == len(ALL_IDS) and first == second


# split_heads says in which order a set of strings iterates: Python's hash seed decides it
SET_ORDER = """
def split_heads(x, n_heads):
    raise RuntimeError(f"order {list({'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta'})}")
"""


def test_a_set_of_strings_iterates_in_one_order_in_every_grading(tmp_path):
    """Every sandbox interpreter starts with one hash seed, whichever process, fork server or start made it."""
    path = tmp_path / "submission.py"
    path.write_text(REFERENCES["lm"].read_text() + SET_ORDER)
    orders = {checked_elsewhere(path, seed, fork, "--only", "split_heads")[0]["message"]
              for seed, fork in (("1", "true"), ("2", "true"), ("3", "false"))}
    assert len(orders) == 1 and "order ['" in next(iter(orders)), orders


def test_report_records_environment_and_sandbox():
    report = grade_text(REFERENCES["lm"].read_text())
    assert report["environment"]["threads"] == 1
    assert report["environment"]["torch"].startswith("2.")
    assert report["sandbox"]["backend"] and report["sandbox"]["limits"]["stage_s"] > 0
    timings = report["timings"]
    assert timings["torch_import_s"] > 0 and timings["sandbox_start_s"] is not None
    assert set(timings["stages"]) >= {"split_heads", "checkpoint_reload.save", "checkpoint_reload.load"}


def test_a_different_seed_draws_different_inputs_and_still_passes():
    report = grade_text(REFERENCES["reverse"].read_text(), seed=7)
    assert set(statuses(report).values()) == {"pass"}, explain(report)
    default = grade_text(REFERENCES["reverse"].read_text())  # the control: the same file under the default seed
    assert report["seed"] == 7 and default["seed"] != 7
    losses = [next(c for c in r["checks"] if c["id"] == "training")["metrics"]["final_loss"] for r in (report, default)]
    assert losses[0] != losses[1], f"the seed drew the same training rows: {losses}"
