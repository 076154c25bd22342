"""First verdicts while training runs, through the store and the API (no sandbox: a stand-in judge sends the
verdict events grader/live.py sends): the worker stores each verdict as it arrives, the result endpoint answers a
queued or running submission with the verdicts so far (partial: true, no score), and forgets them once the result
is stored. The real judge and worker: test_service_partial_live.py."""
import threading

from grader.app import store
from grader.app.db import get_db
from grader.app.models import Submission
from grader.client.http import Client
from .svc_helpers import Course, fake_report
from .test_service_api import REFERENCE, upload
from worker import grading

FINAL = fake_report({"split_heads": "pass", "attention_sdpa": "fail", "rope": "pass"})  # the course's checks


def result(client, token, sid):
    response = client.get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(token))
    return response.status_code, response.get_json()


def row(app, sid) -> Submission:
    with get_db(app).Session() as s:
        return s.get(Submission, sid)


def test_a_queued_submission_answers_a_partial_result_in_a_clear_shape(app, course):
    """The not_graded 404 of before is now 200 with partial: true; an old client that read a result's report and
    score still finds both (no checks yet, score null, current false), and grader.client's result() is still None."""
    client = app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    status, body = result(client, course.alice, sid)
    assert status == 200, body
    assert body["partial"] is True and body["status"] == "queued" and body["current"] is False, body
    assert body["report"] == {"checks": []} and body["score"] is None, "no verdict and no score while queued"
    assert body["pending"] and "split_heads" in body["pending"], "the checks still to come are named"
    assert "error" not in body, "a partial answer is not an error"


def test_verdicts_are_stored_as_they_arrive_and_shown_partially_then_forgotten(app, course):
    client = app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    seen, go_on = {}, threading.Event()

    def judge(data, name, options, on_event):
        on_event({"type": "stage_start", "stage": "split_heads"})
        for check in FINAL["checks"][:2]:  # the correctness checks, decided while training would run
            on_event({"type": "verdict", "check": check})
        on_event({"type": "stage_start", "stage": "rope"})
        for _ in range(100):  # the heartbeat thread writes them at once (not at its next 10 s beat)
            if len(row(app, sid).partial or []) == 2:
                break
            go_on.wait(0.05)
        seen["student"] = result(client, course.alice, sid)
        seen["instructor"] = result(client, course.instructor, sid)
        seen["bob"] = result(client, course.bob, sid)
        on_event({"type": "verdict", "check": FINAL["checks"][2]})
        return FINAL
    assert grading.grade(app, sid, judge=judge).status == "graded"
    status, body = seen["student"]
    assert status == 200 and body["partial"] is True and body["status"] == "running", body
    assert body["report"]["checks"] == FINAL["checks"][:2], "the verdicts so far, exactly as in the final report"
    assert body["score"] is None and body["pending"] == ["rope"] and "seed" not in body["report"]
    assert body["progress"]["check"] == "rope"
    assert seen["instructor"][1]["report"]["checks"] == FINAL["checks"][:2]
    assert seen["bob"][0] == 404, "another student's partial result looks like a missing submission"
    assert row(app, sid).partial is None, "the stored result is the truth: the partial verdicts are cleared"
    status, body = result(client, course.alice, sid)
    assert status == 200 and body["partial"] is False and body["current"] is True
    assert [c["id"] for c in body["report"]["checks"]] == [c["id"] for c in FINAL["checks"]]


def test_a_failed_submission_still_answers_not_graded(app, course):
    client = app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    with get_db(app).session() as s:
        sub = store.find_submission(s, sid)
        sub.status = "failed"
    status, body = result(client, course.alice, sid)
    assert status == 404 and body["error"] == "not_graded" and body["status"] == "failed", body


def test_the_python_client_still_reads_no_result_while_partial(monkeypatch):
    partial = {"partial": True, "status": "running", "report": {"checks": []}, "score": None}
    monkeypatch.setattr(Client, "json", lambda self, method, path, **kw: partial)
    assert Client.result(Client.__new__(Client), 7) is None, "result() is None until the result is stored"


def test_done_comes_with_its_score_and_a_scoring_failure_keeps_the_result(app, course, monkeypatch):
    """The result and its score are stored in one transaction (no poll sees done without the score); a rubric
    problem rolls back the score only (a savepoint), never the result."""
    from grader.app import coursework
    from .svc_helpers import judge_returning
    client = app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    assert grading.grade(app, sid, judge=judge_returning(FINAL)).status == "graded"
    assert result(client, course.alice, sid)[1]["score"] is not None
    other = upload(client, course.alice, REFERENCE + b"\n# again\n").get_json()["id"]

    def broken(*args, **kwargs):
        raise RuntimeError("the rubric does not load")
    monkeypatch.setattr(coursework, "score_result", broken)
    assert grading.grade(app, other, judge=judge_returning(FINAL)).status == "graded"
    status, body = result(client, course.alice, other)
    assert status == 200 and body["partial"] is False and body["score"] is None, body
    assert row(app, other).status == "done"
