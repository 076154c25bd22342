"""The instructor's roster page: a bad roster refused whole with each row named, deactivate and reactivate (the
student's pages refuse them, saying why), remove after a confirmation page (off the roster and the gradebook export,
submissions still on the instructor's pages), a rotated token shown once; the gradebook export as CSV and JSON."""
import csv
import io
import re

import pytest

from .web_helpers import REFERENCE, csrf, grade_now, graded_report, sign_in_student, text_of, upload


@pytest.fixture
def graded_alice(web_app, course):
    """alice signed in, with one upload (submission 1), graded."""
    student = web_app.test_client()
    sign_in_student(student, "alice", course.alice)
    upload(student, REFERENCE + b"# alice\n", "alice.py")
    grade_now(web_app, 1, graded_report())
    return student


def roster_rows(page) -> dict:
    """roster id -> the text of its row in the students table."""
    html = page.get_data(as_text=True)
    rows = re.findall(r'<tr id="student-([^"]+)"[^>]*>(.*?)</tr>', html, re.S)
    return {name: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip() for name, row in rows}


def post(client, path: str, **data):
    return client.post(path, data={"csrf_token": csrf(client, "/instructor/roster"), **data})


def test_a_roster_with_bad_rows_names_each_and_imports_nothing(prof):
    text = "username,name,email\ncarol,Carol,carol@example.edu\nbad user!,Bad,\ndave,Dave,x\n"
    r = post(prof, "/instructor/roster", text=text)
    page = text_of(r)
    assert r.status_code == 422 and "Nothing was imported: 2 problems need fixing." in page, page
    assert "Line 3: username 'bad user!' has ' ', '!'" in page and "Line 4: e-mail 'x' is not an address" in page
    assert set(roster_rows(prof.get("/instructor/roster"))) == {"alice", "bob"}, "not even the good row (carol)"


def test_deactivate_refuses_the_student_and_reactivate_lets_them_back(web_app, course, prof):
    student = web_app.test_client()
    assert sign_in_student(student, "alice", course.alice).status_code == 303
    r = post(prof, "/instructor/roster/alice/deactivate")
    assert r.status_code == 303
    page = prof.get("/instructor/roster")
    assert "alice is deactivated" in text_of(page) and "deactivated" in roster_rows(page)["alice"]
    assert "Reactivate" in roster_rows(page)["alice"] and "Deactivate" in roster_rows(page)["bob"]
    assert student.get("/submit").status_code == 302, "the open session is signed out"
    again = sign_in_student(student, "alice", course.alice)
    assert again.status_code == 403 and "The account alice is deactivated" in text_of(again), text_of(again)
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(
        prof.get("/instructor/assignments/cap/export.csv").get_data(as_text=True)))}
    assert rows["alice"]["state"] == "deactivated", "still in the gradebook, marked"
    post(prof, "/instructor/roster/alice/reactivate")
    assert "active" in roster_rows(prof.get("/instructor/roster"))["alice"]
    assert sign_in_student(student, "alice", course.alice).status_code == 303, "the same token signs in again"


def test_remove_asks_first_then_keeps_the_submissions(web_app, course, prof, graded_alice):
    confirm = prof.get("/instructor/roster/alice/remove")
    assert confirm.status_code == 200 and "Remove alice (Alice)?" in text_of(confirm)
    assert "Their 1 submission is kept" in text_of(confirm)
    assert set(roster_rows(prof.get("/instructor/roster"))) == {"alice", "bob"}, "asking removes nothing"
    r = prof.post("/instructor/roster/alice/remove", data={"csrf_token": csrf(prof, "/instructor/roster/alice/remove")})
    assert r.status_code == 303
    page = prof.get("/instructor/roster")
    assert "alice is removed from the roster and the gradebook; 1 token revoked" in text_of(page)
    assert set(roster_rows(page)) == {"bob"}
    assert "removed" in roster_rows(prof.get("/instructor/roster?removed=1"))["alice"]
    exported = prof.get("/instructor/assignments/cap/export.csv").get_data(as_text=True)
    assert [row["student"] for row in csv.DictReader(io.StringIO(exported))] == ["bob"]
    assert prof.get("/instructor/submissions/1").status_code == 200, "the submission stays on its page"
    history = text_of(prof.get("/instructor/students/alice"))
    assert "alice.py" in history and "removed from the roster" in history, "her page keeps her submissions, marked"
    gone = sign_in_student(web_app.test_client(), "alice", course.alice)
    assert gone.status_code == 403 and "removed from the roster" in text_of(gone)


def test_a_rotated_token_is_shown_once_and_replaces_the_old_one(web_app, course, prof):
    student = web_app.test_client()
    sign_in_student(student, "bob", course.bob)
    r = post(prof, "/instructor/roster/bob/rotate-token")
    assert r.status_code == 200 and "shown only this once" in text_of(r)
    token = re.search(r'<code class="token" id="rotated-token">([^<]+)</code>', r.get_data(as_text=True))[1]
    assert token not in prof.get("/instructor/roster").get_data(as_text=True), "shown once, not again"
    assert student.get("/submit").status_code == 302, "the old token's session is signed out"
    assert sign_in_student(web_app.test_client(), "bob", course.bob).status_code == 401
    assert sign_in_student(web_app.test_client(), "bob", token).status_code == 303


def test_the_actions_need_the_form_token(prof):
    r = prof.post("/instructor/roster/alice/remove", data={})
    assert r.status_code == 400 and "alice" in roster_rows(prof.get("/instructor/roster"))


def test_the_gradebook_exports_as_json_with_names_and_the_counted_submission(prof, graded_alice):
    r = prof.get("/instructor/assignments/cap/export.json")
    rows = {row["student"]: row for row in r.get_json()}
    assert r.status_code == 200 and 'filename="cap.json"' in r.headers["Content-Disposition"]
    assert (rows["alice"]["name"], rows["alice"]["submission"], rows["alice"]["state"]) == ("Alice", 1, "active")
    assert rows["alice"]["late_penalty"] == {"fraction": 0.0, "points": 0.0}, "on time: nothing taken"
    assert rows["bob"]["submission"] is None and rows["bob"]["late_penalty"] is None
