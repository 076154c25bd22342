"""While grading runs, the result pages list the checks decided so far (status.json's verdicts, the same list the
server renders), and the header's badge and the status box take their state from one field."""
import re

import pytest

from .web_helpers import graded_report, sign_in_instructor, sign_in_student, text_of, upload


@pytest.fixture
def running(web_app, client, course):
    """Submission 1, running, with two verdicts stored by the worker's heartbeat."""
    from grader.app.db import get_db
    from grader.app.models import Submission
    sign_in_student(client, "alice", course.alice)
    upload(client)
    checks = {c["id"]: c for c in graded_report()["checks"]}
    with web_app.app_context(), get_db(web_app).session() as s:
        sub = s.get(Submission, 1)
        sub.status, sub.current_check = "running", "training"
        sub.partial = [checks["split_heads"], checks["attention_sdpa"]]
    return client, checks


def badges(html: str) -> list[str]:
    return re.findall(r'<span class="badge s-(\w+)" data-live-status>', html)


def test_status_json_carries_the_verdicts_so_far_for_the_student(running):
    client, checks = running
    status = client.get("/submissions/1/status.json").get_json()
    assert status["status"] == "running" and not status["finished"]
    assert [v["id"] for v in status["verdicts"]] == ["split_heads", "attention_sdpa"]
    first = status["verdicts"][0]
    assert first["status"] == checks["split_heads"]["status"] and first["message"] == checks["split_heads"]["message"]
    assert first["title"] and first["title"] != "split_heads", "students see the check's title, not its id"


def test_the_page_lists_them_and_the_badge_says_what_the_box_says(running):
    client, checks = running
    html = client.get("/submissions/1").get_data(as_text=True)
    assert badges(html) == ["running"], "the header's badge follows the status field the box shows"
    assert "Running" in text_of(client.get("/submissions/1")).split("Checks decided")[0]
    listed = re.search(r'<ul class="live-verdicts" data-live-verdicts[^>]*>(.*?)</ul>', html, re.S)
    assert listed and listed.group(1).count('<li class="live-verdict') == 2, "each verdict so far is listed"
    assert checks["split_heads"]["message"].split(";")[0] in listed.group(1)
    assert "<script>" not in html and "<script " not in html.replace('<script src=', ''), "no inline script (CSP)"


def test_the_instructor_page_lists_them_too(running, web_app):
    client, _ = running
    instructor = web_app.test_client()
    sign_in_instructor(instructor)
    html = instructor.get("/instructor/submissions/1").get_data(as_text=True)
    assert badges(html) == ["running"]
    assert html.count('<li class="live-verdict') == 2
    status = instructor.get("/instructor/submissions/1/status.json").get_json()
    assert [v["id"] for v in status["verdicts"]] == ["split_heads", "attention_sdpa"]


def test_nothing_is_listed_once_graded(web_app, client, course):
    sign_in_student(client, "alice", course.alice)
    upload(client)
    html = client.get("/submissions/1").get_data(as_text=True)
    assert badges(html) == ["queued"] and re.search(r"data-live-verdicts[^>]* hidden", html), "queued: empty list"
    from .web_helpers import grade_now
    grade_now(web_app, 1, graded_report())
    status = client.get("/submissions/1/status.json").get_json()
    assert status["finished"] and status["verdicts"] == []
