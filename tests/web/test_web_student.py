"""The student's pages: form validation, the status and result pages, ownership, hidden items and rate limits."""
import pytest

from .web_helpers import (REFERENCE, csrf, graded_report, grade_now, sign_in_instructor, sign_in_student, text_of,
                          upload)

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


@pytest.fixture
def alice(client, course):
    sign_in_student(client, "alice", course.alice)
    return client


@pytest.mark.parametrize("fields, message", [
    (dict(module=b"def f(:\n    pass\n"), "the file is not valid Python: invalid syntax at line 1"),
    (dict(module=b"x = 1\n"), "TRACK is missing"),
    (dict(module=b""), "the file is empty"),
    (dict(filename="model.txt"), "the module must be a Python file ending in .py"),
    (dict(report=(b"hello", "report.docx")), "must be a PDF (.pdf) or Markdown (.md) file"),
    (dict(report=(b"<html>not a pdf</html>", "report.pdf")), "is not a PDF file"),
    (dict(report=(b"\xff\xfe bad", "report.md")), "is not UTF-8 text"),
    (dict(assignment=""), "Choose the assignment"),
    (dict(assignment="nope"), "There is no assignment 'nope'"),
], ids=["syntax", "no-track", "empty", "not-py", "docx", "fake-pdf", "bad-md", "no-assignment", "bad-assignment"])
def test_a_bad_upload_shows_what_is_wrong_and_stores_nothing(web_app, alice, fields, message):
    from grader.app.db import get_db
    from grader.app.models import Submission
    r = upload(alice, **fields)
    page = text_of(r)
    assert r.status_code == 422, f"expected the form again with a message, got {r.status_code}"
    assert message in page, f"the form should say {message!r}; it says: {page[:600]}"
    assert "Nothing was submitted" in page
    with web_app.app_context(), get_db(web_app).session() as s:
        assert s.query(Submission).count() == 0, "a refused upload must not be stored"


def test_an_upload_with_a_report_is_queued_and_the_status_page_polls(web_app, alice):
    from grader.app import coursework
    from grader.app.db import get_db
    from grader.app.models import Submission
    r = upload(alice, report=(PDF, "report.pdf"))
    assert r.status_code == 303 and r.location == "/submissions/1"
    page = alice.get("/submissions/1")
    text = text_of(page)
    assert "Submission 1 received and queued" in text and "Queued: number 1 in the queue" in text
    html = page.get_data(as_text=True)
    assert 'data-status-url="/submissions/1/status.json"' in html, "JavaScript polls this endpoint"
    assert '<meta http-equiv="refresh"' in html, "without JavaScript the page refreshes itself while pending"
    status = alice.get("/submissions/1/status.json").get_json()
    assert status["status"] == "queued" and status["queue_position"] == 1 and not status["finished"]
    with web_app.app_context(), get_db(web_app).session() as s:
        report = coursework.report_of(s, s.get(Submission, 1))
        assert report.kind == "pdf" and report.content == PDF


def test_the_same_module_again_is_not_queued_twice(alice):
    upload(alice)
    r = upload(alice)
    assert r.location == "/submissions/1"
    assert "identical to your latest submission (1)" in text_of(alice.get(r.location))


def test_the_result_page_shows_points_checks_diagnostics_and_the_loss_curve(web_app, alice):
    upload(alice)
    grade_now(web_app, 1, graded_report())
    page = alice.get("/submissions/1")
    text, html = text_of(page), page.get_data(as_text=True)
    assert "Graded" in text and "Score" in text
    assert "Head split and merge" in text and "0 / 3" in text, "points per rubric item"
    assert "Largest difference 4.4" in text and "Where batch 0, head 2, position 2, channel 5" in text, \
        "the diagnostics name the largest difference and where it is"
    assert "Where to look: the reshape in split_heads" in text
    assert '<svg class="chart chart-line"' in html and "<polyline" in html, "the loss curve, drawn on the server"
    assert "unigram baseline 3.02" in text
    assert "data-status-url" in html and '<meta http-equiv="refresh"' not in html, "a finished page stops refreshing"
    assert "20261129" not in html, "the judge's seed is never shown to students"
    assert "My submissions" in text and "mine.py" in text, "the student's own history"


def test_a_student_cannot_open_another_students_submission(web_app, client, course):
    sign_in_student(client, "alice", course.alice)
    upload(client, report=(b"# alice's report\n", "report.md"))
    grade_now(web_app, 1, graded_report())
    bob = web_app.test_client()
    sign_in_student(bob, "bob", course.bob)
    for path in ("/submissions/1", "/submissions/1/status.json", "/submissions/1/report", "/submissions/1/file"):
        r = bob.get(path)
        assert r.status_code == 404, f"bob opened alice's {path}: {r.status_code}"
        assert "mine.py" not in r.get_data(as_text=True)
    assert bob.get("/submissions/999").status_code == 404, "someone else's looks exactly like a missing one"
    assert "mine.py" not in text_of(bob.get("/submissions")), "bob's history lists only his own"
    assert client.get("/submissions/1/report").status_code == 200, "alice can download her own report"


def test_hidden_items_stay_hidden_until_released(web_app, client, course):
    sign_in_student(client, "alice", course.alice)
    upload(client)
    grade_now(web_app, 1, graded_report(fail_split=False))
    prof = web_app.test_client()
    sign_in_instructor(prof)
    token = csrf(prof, "/instructor/submissions/1")
    prof.post("/instructor/submissions/1/manual", data={"csrf_token": token, "points_spec_contract": "7",
                                                        "comment_spec_contract": "shapes stated clearly"})
    page = text_of(client.get("/submissions/1"))
    assert "IDs, shapes and masks stated" not in page and "shapes stated clearly" not in page, \
        "a hidden manual item (and its comment) must not show before it is released"
    assert "/ 50" in page, "the total covers only what the student may see"
    assert "10 more items (50 points)" in page
    prof.post("/instructor/assignments/cap/releases", data={"csrf_token": token, "release": "specification"})
    page = text_of(client.get("/submissions/1"))
    assert "IDs, shapes and masks stated" in page and "shapes stated clearly" in page, "released: now shown"
    assert "/ 65" in page


def test_uploads_are_rate_limited_per_student(web_app, client, course):
    web_app.config.update(WEB_UPLOAD_LIMIT=2, WEB_UPLOAD_WINDOW_S=60)
    sign_in_student(client, "alice", course.alice)
    for n in range(2):
        assert upload(client, REFERENCE + f"# {n}\n".encode()).status_code == 303
    r = upload(client, REFERENCE + b"# 3\n")
    assert r.status_code == 429 and "You are submitting faster than the service allows" in text_of(r)
    bob = web_app.test_client()
    sign_in_student(bob, "bob", course.bob)
    assert upload(bob).status_code == 303, "the limit is per student: bob may still submit"


def test_failed_sign_ins_are_rate_limited(web_app, client, course):
    web_app.config.update(WEB_SIGNIN_LIMIT=3, WEB_SIGNIN_WINDOW_S=300)
    for _ in range(3):
        assert sign_in_student(client, "alice", "gr_guess").status_code == 401
    r = sign_in_student(client, "alice", "gr_guess")
    assert r.status_code == 429 and "Too many failed sign-ins" in text_of(r), "a further wrong token waits now"
    assert sign_in_student(client, "alice", course.alice).status_code == 303, \
        "the right token always signs in (no lockout: tests/web/test_web_hardening.py)"
    assert sign_in_student(web_app.test_client(), "bob", course.bob).status_code == 303, "other roster ids too"


def test_an_unexpected_error_shows_no_traceback(web_app, alice, monkeypatch):
    from grader.app import coursework

    def broken(*args, **kwargs):
        raise RuntimeError("secret internals /etc/passwd")
    monkeypatch.setattr(coursework, "submission_rows", broken)
    r = alice.get("/submissions")
    body = r.get_data(as_text=True)
    assert r.status_code == 500 and "Something went wrong on our side" in body
    assert "Traceback" not in body and "secret internals" not in body and "RuntimeError" not in body


def test_the_json_api_applies_the_same_releases_as_the_pages(web_app, client, course):
    sign_in_student(client, "alice", course.alice)
    upload(client)
    grade_now(web_app, 1, graded_report(fail_split=False))
    api = web_app.test_client()
    auth = {"Authorization": f"Bearer {course.alice}"}

    def category_ids():
        score = api.get("/api/v1/submissions/1/result", headers=auth).get_json()["score"]
        return {c["id"] for c in score["categories"]}
    assert "specification" not in category_ids(), "a hidden category stays out of the student's API result"
    prof = web_app.test_client()
    sign_in_instructor(prof)
    token = csrf(prof, "/instructor/submissions/1")
    prof.post("/instructor/assignments/cap/releases", data={"csrf_token": token, "release": "specification"})
    assert "specification" in category_ids(), "released on the pages: shown by the API too"
