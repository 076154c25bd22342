"""The roster through the API: ids and e-mails checked on the way in, deactivate, reactivate, remove, rotate a
token, and the gradebook export with who each row is and what the counted submission lost for lateness."""
import csv
import io
from datetime import timedelta
from pathlib import Path

import pytest

from grader.app.db import get_db
from grader.app.models import Student, utcnow
from .svc_helpers import Course, fake_report, judge_returning, make_course
from worker import grading

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()


def upload(client, token, data: bytes = REFERENCE, **form):
    return client.post("/api/v1/assignments/cap/submissions", headers=Course.auth(token),
                       data={"file": (io.BytesIO(data), "mine.py"), **form}, content_type="multipart/form-data")


def roster_names(client, auth, removed=False) -> dict:
    rows = client.get("/api/v1/students" + ("?removed=true" if removed else ""), headers=auth).get_json()
    return {r["username"]: r["state"] for r in rows}


# ---------------------------------------------------------------- checked on the way in

@pytest.mark.parametrize("fields,expected", [
    ({"username": "bad user!"}, "username 'bad user!' has ' ', '!'"),
    ({"username": ""}, "empty username"),
    ({"username": "x" * 65}, "at most 64"),
    ({"username": "carol", "email": "x"}, "e-mail 'x' is not an address"),
    ({"username": "carol", "email": "carol@example"}, "e-mail 'carol@example' is not an address"),
])
def test_add_student_refuses_a_bad_id_or_email(sqlite_app, fields, expected):
    course = make_course(sqlite_app)
    client, auth = sqlite_app.test_client(), Course.auth(course.instructor)
    r = client.post("/api/v1/students", headers=auth, json=fields)
    assert r.status_code == 400 and expected in r.get_json()["message"], r.get_json()
    assert set(roster_names(client, auth)) == {"alice", "bob"}, "nothing was added"


def test_add_student_takes_a_good_one(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    r = client.post("/api/v1/students", headers=auth,
                    json={"username": "carol.o-k_2", "name": "Carol", "email": "carol+cap@mail.example.edu"})
    assert r.status_code == 201 and r.get_json()["state"] == "active", r.get_json()


def test_a_roster_with_bad_rows_is_refused_whole_naming_each_row(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    text = ("username,name,email\ncarol,Carol,carol@example.edu\nbad user!,Bad,\ndave,Dave,x\n"
            "carol,Again,\n")
    r = client.post("/api/v1/students/import", headers={**auth, "Content-Type": "text/csv"}, data=text)
    body = r.get_json()
    assert r.status_code == 400 and body["error"] == "bad_roster", body
    assert [p.split(":")[0] for p in body["problems"]] == ["line 3", "line 4", "line 5"], body["problems"]
    assert "'bad user!'" in body["problems"][0] and "'x'" in body["problems"][1] and "line 2" in body["problems"][2]
    assert "nothing imported" in body["message"]
    assert set(roster_names(client, auth)) == {"alice", "bob"}, "one bad row refuses every row, the good one too"


def test_a_good_roster_imports_with_tokens_that_work(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    r = client.post("/api/v1/students/import", headers=auth,
                    json={"csv": "username,email\ncarol,carol@example.edu\nalice,\n", "tokens": True})
    body = r.get_json()
    assert r.status_code == 200 and body["added"] == 1, body
    carol = next(row for row in body["students"] if row["username"] == "carol")
    alice = next(row for row in body["students"] if row["username"] == "alice")
    assert alice["token"] is None and not alice["new"], "already there: kept, no new token without reissue"
    assert client.get("/api/v1/me", headers=Course.auth(carol["token"])).get_json()["student"] == "carol"


# ---------------------------------------------------------------- deactivate, reactivate

def test_a_deactivated_student_cannot_use_the_api_and_stays_on_the_roster(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    r = client.post("/api/v1/students/alice/deactivate", headers=auth)
    assert r.status_code == 200 and r.get_json()["state"] == "deactivated", r.get_json()
    me = client.get("/api/v1/me", headers=Course.auth(course.alice))
    assert me.status_code == 403 and "alice is deactivated" in me.get_json()["message"], me.get_json()
    refused = upload(client, course.alice)
    assert refused.status_code == 403 and "deactivated" in refused.get_json()["message"]
    for_her = upload(client, course.instructor, student="alice")
    assert for_her.status_code == 403 and "deactivated" in for_her.get_json()["message"], \
        "an instructor cannot upload for a deactivated student either"
    assert roster_names(client, auth) == {"alice": "deactivated", "bob": "active"}
    rows = client.get("/api/v1/assignments/cap/export", headers=auth).get_json()
    assert {r["student"]: r["state"] for r in rows} == {"alice": "deactivated", "bob": "active"}
    client.post("/api/v1/students/alice/reactivate", headers=auth)
    assert client.get("/api/v1/me", headers=Course.auth(course.alice)).status_code == 200, \
        "reactivated: the same token works again"


# ---------------------------------------------------------------- remove

def test_removing_a_student_revokes_tokens_and_keeps_the_submissions(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    sid = upload(client, course.alice).get_json()["id"]
    grading.grade(app, sid, judge=judge_returning(fake_report({"split_heads": "pass"})))
    r = client.post("/api/v1/students/alice/remove", headers=auth)
    assert r.status_code == 200 and r.get_json()["state"] == "removed" and r.get_json()["tokens_revoked"] == 1
    me = client.get("/api/v1/me", headers=Course.auth(course.alice))
    assert me.status_code == 403 and "removed from the roster" in me.get_json()["message"], me.get_json()
    assert roster_names(client, auth) == {"bob": "active"}, "off the roster"
    assert roster_names(client, auth, removed=True) == {"alice": "removed", "bob": "active"}
    assert [row["student"] for row in client.get("/api/v1/assignments/cap/export", headers=auth).get_json()] \
        == ["bob"], "off the gradebook"
    kept = client.get(f"/api/v1/submissions/{sid}", headers=auth)
    assert kept.status_code == 200 and kept.get_json()["student"] == "alice", "the submission is kept"
    assert client.get(f"/api/v1/submissions/{sid}/result", headers=auth).status_code == 200
    again = client.post("/api/v1/students", headers=auth, json={"username": "alice"})
    assert again.status_code == 409 and "reactivate" in again.get_json()["message"]
    assert client.post("/api/v1/students/alice/rotate-token", headers=auth).status_code == 409
    assert client.post("/api/v1/students/alice/tokens", headers=auth).status_code == 409, "no token while removed"
    client.post("/api/v1/students/alice/reactivate", headers=auth)
    assert client.get("/api/v1/me", headers=Course.auth(course.alice)).status_code == 401, \
        "back on the roster, but the old token stays revoked"
    new = client.post("/api/v1/students/alice/rotate-token", headers=auth).get_json()["token"]
    assert client.get("/api/v1/me", headers=Course.auth(new)).get_json()["student"] == "alice"


# ---------------------------------------------------------------- rotate

def test_rotating_a_token_revokes_the_old_ones(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    extra = client.post("/api/v1/students/bob/tokens", headers=auth).get_json()["token"]
    r = client.post("/api/v1/students/bob/rotate-token", headers=auth)
    body = r.get_json()
    assert r.status_code == 201 and body["tokens_revoked"] == 2 and body["token"].startswith("gr_"), body
    for old in (course.bob, extra):
        gone = client.get("/api/v1/me", headers=Course.auth(old))
        assert gone.status_code == 401 and "revoked" in gone.get_json()["message"]
    assert client.get("/api/v1/me", headers=Course.auth(body["token"])).get_json()["student"] == "bob"
    assert client.post("/api/v1/students/bob/rotate-token", headers=Course.auth(body["token"])).status_code == 403, \
        "instructors only"


# ---------------------------------------------------------------- the export

def test_the_export_names_the_student_and_the_counted_submissions_late_penalty(app):
    course = make_course(app, due_at=(utcnow() - timedelta(days=1, hours=1)).isoformat() + "Z",
                         late_penalty_per_day=0.1, grace_minutes=0)
    client, auth = app.test_client(), Course.auth(course.instructor)
    with get_db(app).session() as s:
        alice = s.query(Student).filter_by(username="alice").one()
        alice.email = "alice@example.edu"
    sid = upload(client, course.alice).get_json()["id"]
    grading.grade(app, sid, judge=judge_returning(fake_report({"split_heads": "pass", "attention_sdpa": "pass",
                                                                "rope": "pass"})))
    rows = {r["student"]: r for r in client.get("/api/v1/assignments/cap/export", headers=auth).get_json()}
    a = rows["alice"]
    assert (a["name"], a["email"], a["state"], a["submission"]) == ("Alice", "alice@example.edu", "active", sid), a
    assert a["late_penalty"]["fraction"] == pytest.approx(0.2), "2 started days late at 0.1 a day"
    assert a["late_penalty"]["points"] == a["score"]["late_penalty"]["points"] > 0, a["late_penalty"]
    assert rows["bob"]["submission"] is None and rows["bob"]["late_penalty"] is None
    text = client.get("/api/v1/assignments/cap/export?format=csv", headers=auth).get_data(as_text=True)
    by = {r["student"]: r for r in csv.DictReader(io.StringIO(text))}
    assert by["alice"]["email"] == "alice@example.edu" and by["alice"]["submission"] == str(sid)
    assert float(by["alice"]["late_penalty_fraction"]) == pytest.approx(0.2)
    assert float(by["alice"]["late_penalty"]) == a["late_penalty"]["points"]
    assert by["bob"]["submission"] == "" and by["bob"]["state"] == "active"


def test_the_store_itself_refuses_an_upload_for_a_deactivated_or_removed_student(app, course):
    """Whoever calls it (a script, a future route), the store takes no upload for an inactive account."""
    from grader.app import accounts, store
    from grader.app.store import StoreError
    client, auth = app.test_client(), Course.auth(course.instructor)
    for action, state in (("deactivate", "deactivated"), ("remove", "removed")):
        client.post(f"/api/v1/students/alice/{action}", headers=auth)
        with app.app_context(), get_db(app).session() as s:
            with pytest.raises(StoreError) as refused:
                store.create_submission(s, store.get_assignment(s, "cap"), accounts.get_student(s, "alice"),
                                        REFERENCE, "mine.py", enforce_rules=False)
        assert refused.value.status == 403 and state in refused.value.message
        client.post("/api/v1/students/alice/reactivate", headers=auth)
