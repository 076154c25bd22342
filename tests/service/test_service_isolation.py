"""The sandbox through the service: the API's result carries the layers of its grading, a worker without bubblewrap
refuses (retried, then failed with the remedy, never a student's result), and a submission that leaves SysV objects,
/run/lock files and deep trees behind leaves nothing for the next one graded by the same worker code."""
import functools
import os
from pathlib import Path

import pytest

from grader.app import accounts, store
from grader.app.db import get_db
from grader.app.models import Submission
from grader.sandbox.base import settle
from grader.sandbox.cleanup import sysv_objects
from grader.sandbox.isolation import ALLOW_WEAK_ENV
from grader.sandbox.process import FULL, SHARED_TMP
from grader.sandbox.uids import FIRST_UID, POOL_SIZE
from worker import grading

from .svc_helpers import real_judge


ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()
ATTACKS = ROOT / "tests" / "attacks"
MARKS = ("grader-left-", "grader-deep-", "grader-many-", "grader-odd-")


@pytest.fixture
def own_prestarter():
    """The worker's shared sandbox-started-ahead, fresh for this test and closed after it (it keeps the settings,
    ALLOW_WEAK included, of the moment it started its next sandbox)."""
    from grader.sandbox import prestart

    def drop():
        with prestart._SHARED_LOCK:
            ahead = prestart._SHARED.pop("process", None)
        if ahead is not None:
            ahead.close()
    drop()
    yield
    drop()


def submit(app, data: bytes) -> int:
    with app.app_context(), get_db(app).session() as s:
        return store.create_submission(s, store.get_assignment(s, "cap"), accounts.get_student(s, "alice"), data,
                                       "sub.py").submission.id


def result(app, course, sid) -> dict:
    response = app.test_client().get(f"/api/v1/submissions/{sid}/result", headers=course.auth(course.alice))
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def pool_traces() -> list[str]:
    """SysV objects of any sandbox uid and the leftover attacks' marked files (only those attacks make them)."""
    left = [f"sysv {k} {i} of uid {uid}" for uid in range(FIRST_UID, FIRST_UID + POOL_SIZE)
            for k, i in sysv_objects(uid)]
    for top in SHARED_TMP:
        try:
            left += [f"file {e.path}" for e in os.scandir(top) if e.name.startswith(MARKS)]
        except OSError:
            pass
    return left


@pytest.mark.slow
def test_the_api_result_carries_the_sandbox_layers(svc):
    app, course = svc
    sid = submit(app, REFERENCE)
    assert grading.grade(app, sid, judge=real_judge()).status == "graded"
    box = result(app, course, sid)["report"]["sandbox"]
    assert box["layers"] == list(FULL) and box["weak"] is False, box


def test_a_worker_without_bubblewrap_retries_then_fails_with_the_remedy(svc, monkeypatch):
    app, _ = svc
    monkeypatch.setenv("PATH", "/nonexistent-grader-test")
    sid = submit(app, REFERENCE)
    for attempt in range(1, app.config["MAX_ATTEMPTS"] + 1):
        out = grading.grade(app, sid, judge=real_judge())
        assert out.status == ("retry" if attempt < app.config["MAX_ATTEMPTS"] else "failed"), out
        assert "IsolationMissing" in out.detail and "apt-get install bubblewrap" in out.detail, out.detail
    with get_db(app).Session() as s:
        sub = s.get(Submission, sid)
        assert sub.status == "failed" and "bubblewrap is not installed" in sub.error, sub.error


@pytest.mark.slow
@pytest.mark.parametrize("weak", [False, True], ids=["every-layer", "allow-weak-no-bwrap"])
def test_leftovers_do_not_reach_the_next_submission(svc, monkeypatch, own_prestarter, weak):
    app, course = svc
    if weak:  # the operator's fallback: the host's own /tmp, /run/lock and IPC namespace, swept after each run
        monkeypatch.setenv("PATH", "/nonexistent-grader-test")
        monkeypatch.setenv(ALLOW_WEAK_ENV, "true")
    judge = functools.partial(grading.run_judge, prestart=True)  # the worker's own way, sandboxes started ahead
    text = REFERENCE.decode() + "".join(f"\n\n# ---- {a} ----\n" + (ATTACKS / f"{a}.py").read_text()
                                        for a in ("sysv_ipc", "run_lock", "deep_tree", "daemon"))
    attack = submit(app, text.encode())
    assert grading.grade(app, attack, judge=judge).status == "graded"
    checks = {c["id"]: c for c in result(app, course, attack)["report"]["checks"]}
    assert "left sysv shm=2 msg=2 sem=2" in checks["attention_sdpa"]["stdout"], checks["attention_sdpa"]
    assert "left a tree in /tmp: 3000 levels" in checks["attention_sdpa"]["stdout"]
    nxt = submit(app, REFERENCE + b"\n# the next one\n")
    assert grading.grade(app, nxt, judge=judge).status == "graded"
    report = result(app, course, nxt)["report"]
    assert {c["status"] for c in report["checks"]} == {"pass"}, report["checks"]
    assert report["sandbox"]["weak"] is weak, report["sandbox"]
    assert result(app, course, attack)["report"]["sandbox"]["weak"] is weak
    settle()  # a sandbox started ahead is killed and swept in a thread after its done: CI once read before that
    assert pool_traces() == [], "left on the host after two gradings"
