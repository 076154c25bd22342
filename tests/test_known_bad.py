"""Each known-bad submission fails exactly the checks its bug breaks, and passes the rest."""
import importlib.util

import pytest

from grader.registry import check_ids
from tests.support.grading import SUBMISSIONS, explain, grade_text, statuses

pytestmark = pytest.mark.slow


def load_known_bad():
    """submissions/known_bad.py, loaded by path (submissions/ is data, not a package)."""
    spec = importlib.util.spec_from_file_location("known_bad", SUBMISSIONS / "known_bad.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KNOWN_BAD = load_known_bad()
BUGS = {bug.name: bug for bug in KNOWN_BAD.KNOWN_BAD}


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """Every known-bad file, written once."""
    paths = KNOWN_BAD.materialize(tmp_path_factory.mktemp("known_bad"))
    return {p.stem: p for p in paths}


def test_there_is_a_known_bad_example_for_every_registered_check():
    covered = set().union(*(bug.fails for bug in BUGS.values()))
    missing = set(check_ids()) - covered
    assert not missing, f"checks without a known-bad example: {missing}"


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_fails_its_checks_and_only_those(name, bad_files):
    bug = BUGS[name]
    report = grade_text(bad_files[name].read_text())
    got = statuses(report)
    failing = {cid for cid, s in got.items() if s != "pass"}
    assert failing == set(bug.fails), f"{name}: expected failures {sorted(bug.fails)}\n{explain(report)}"
    assert all(got[c] == "fail" for c in bug.fails), f"{name}: the bug is a failure, not a crash\n{explain(report)}"
