"""The JSON API without workers: upload rules, tokens, duplicates, regrade and rescore, the OpenAPI document."""
import io
from pathlib import Path

import pytest

from grader.app import store, visibility
from grader.app.db import get_db
from grader.app.models import Submission
from .svc_helpers import Course, fake_report, judge_returning, make_course
from worker import grading

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()
URL = "/api/v1/assignments/cap/submissions"


def upload(client, token, data: bytes, name="mine.py", **form):
    return client.post(URL, headers=Course.auth(token), data={"file": (io.BytesIO(data), name), **form},
                       content_type="multipart/form-data")


def n_submissions(app) -> int:
    with get_db(app).Session() as s:
        return len(store.list_submissions(s))


BAD_UPLOADS = [
    ("empty", b"", 422, "the file is empty"),
    ("binary", b"TRACK = 'lm'\n\x00\x01\x02", 422, "NUL byte"),
    ("not UTF-8", b"TRACK = 'lm'\n# caf\xe9\n", 422, "not UTF-8"),
    ("not Python", b"TRACK = 'lm'\ndef broken(:\n", 422, "not valid Python"),
    ("no TRACK", b"import torch\n", 422, "TRACK is missing"),
    ("unknown TRACK", b"TRACK = 'vision'\n", 422, "it must be \"reverse\" or \"lm\""),
    ("other track", REFERENCE.replace(b'TRACK = "lm"', b'TRACK = "reverse"'), 422, 'graded on track "lm"'),
    ("too large", b"TRACK = 'lm'\n" + b"#" * 300_000 + b"\n", 413, "the limit is 262144 bytes"),
    ("far too large", b"#" * (2 << 20), 413, "at most 262144 bytes"),
]


@pytest.mark.parametrize("label,data,status,says", BAD_UPLOADS, ids=[b[0] for b in BAD_UPLOADS])
def test_a_bad_upload_is_refused_with_a_message_naming_the_problem(sqlite_app, label, data, status, says):
    course = make_course(sqlite_app, track="lm")
    r = upload(sqlite_app.test_client(), course.alice, data)
    assert r.status_code == status, f"{label}: {r.status_code} {r.get_json()}"
    assert says in r.get_json()["message"], f"{label}: the message should say {says!r}: {r.get_json()}"
    assert n_submissions(sqlite_app) == 0, f"{label}: a refused upload must not be stored or queued"


def test_an_upload_without_a_file_is_a_bad_request(sqlite_app):
    course = make_course(sqlite_app)
    r = sqlite_app.test_client().post(URL, headers=Course.auth(course.alice), data={"other": "x"})
    assert r.status_code == 400 and "file" in r.get_json()["message"]


def test_a_raw_body_upload_works_too(sqlite_app):
    course = make_course(sqlite_app)
    r = sqlite_app.test_client().post(URL + "?filename=raw.py", headers=Course.auth(course.alice), data=REFERENCE,
                                      content_type="application/octet-stream")
    assert r.status_code == 202, r.get_json()
    assert r.get_json()["filename"] == "raw.py" and r.get_json()["status"] == "queued"


def test_the_same_file_twice_is_recognised(app, course):
    client = app.test_client()
    first = upload(client, course.alice, REFERENCE)
    again = upload(client, course.alice, REFERENCE)
    assert first.status_code == 202 and again.status_code == 200
    assert again.get_json()["id"] == first.get_json()["id"] and again.get_json()["duplicate"] is True
    assert "identical to your latest submission" in again.get_json()["message"]
    other = upload(client, course.alice, REFERENCE + b"\n# changed\n")
    back = upload(client, course.alice, REFERENCE)
    assert back.status_code == 202, "going back to an earlier file is a new latest submission"
    assert back.get_json()["same_as"] == first.get_json()["id"] and other.get_json()["same_as"] is None
    assert upload(client, course.bob, REFERENCE).status_code == 202, "another student's identical file is theirs"
    assert n_submissions(app) == 4


def test_a_student_sees_only_their_own_submissions(app, course):
    client = app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    grading.grade(app, sid, judge=judge_returning(fake_report({"split_heads": "pass"})))
    for path in (f"/api/v1/submissions/{sid}", f"/api/v1/submissions/{sid}/result",
                 f"/api/v1/submissions/{sid}/results", f"/api/v1/submissions/{sid}/file"):
        assert client.get(path, headers=Course.auth(course.alice)).status_code == 200, path
        r = client.get(path, headers=Course.auth(course.bob))
        assert r.status_code == 404, f"bob read alice's {path}: {r.status_code}"
        assert r.get_json()["message"] == f"no submission {sid}", "another's submission must look like a missing one"
        assert client.get(path, headers=Course.auth(course.instructor)).status_code == 200, path
    assert client.get(URL, headers=Course.auth(course.bob)).get_json() == []
    assert client.get(f"/api/v1/submissions/{sid}/attempts", headers=Course.auth(course.alice)).status_code == 403


def test_a_student_cannot_submit_for_another_or_use_instructor_calls(sqlite_app):
    course = make_course(sqlite_app)
    client = sqlite_app.test_client()
    assert upload(client, course.alice, REFERENCE, student="bob").status_code == 403
    for method, path in (("post", "/api/v1/assignments"), ("get", "/api/v1/students"), ("post", "/api/v1/rescore"),
                         ("get", "/api/v1/assignments/cap/export"), ("post", "/api/v1/submissions/1/regrade")):
        r = getattr(client, method)(path, headers=Course.auth(course.alice), json={})
        assert r.status_code == 403, f"{method} {path}: {r.status_code}"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer gr_nope"}, {"Authorization": "Basic eDp5"}])
def test_a_missing_or_unknown_token_is_401(sqlite_app, headers):
    r = sqlite_app.test_client().get("/api/v1/assignments", headers=headers)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_token_stops_working(sqlite_app):
    from grader.app.accounts import list_tokens, revoke_token
    course = make_course(sqlite_app)
    client = sqlite_app.test_client()
    assert client.get("/api/v1/me", headers=Course.auth(course.bob)).get_json() == {"role": "student", "student": "bob"}
    with get_db(sqlite_app).session() as s:
        revoke_token(s, [t for t in list_tokens(s) if t.student and t.student.username == "bob"][0].id)
    assert client.get("/api/v1/me", headers=Course.auth(course.bob)).status_code == 401


def test_tokens_are_stored_hashed(sqlite_app):
    from grader.app.accounts import list_tokens
    course = make_course(sqlite_app)
    with get_db(sqlite_app).Session() as s:
        stored = {t.token_hash for t in list_tokens(s)}
    assert course.alice not in stored and len(stored) == 3 and all(len(h) == 64 for h in stored)


def test_the_instructor_runs_the_course_through_the_api(sqlite_app):
    course = make_course(sqlite_app)
    client, auth = sqlite_app.test_client(), Course.auth(course.instructor)
    r = client.post("/api/v1/assignments", headers=auth, json={"slug": "hw2", "checks": ["rope"], "seed": 7})
    assert r.status_code == 201 and r.get_json()["seed"] == 7
    assert "seed" not in client.get("/api/v1/assignments/hw2", headers=Course.auth(course.alice)).get_json()
    assert client.post("/api/v1/assignments", headers=auth, json={"slug": "hw3", "checks": ["nope"]}).status_code == 400
    assert client.post("/api/v1/students", headers=auth, json={"username": "carol"}).status_code == 201
    token = client.post("/api/v1/students/carol/tokens", headers=auth).get_json()["token"]
    r = client.post("/api/v1/assignments/hw2/submissions", headers=Course.auth(token),
                    data={"file": (io.BytesIO(REFERENCE), "c.py")})
    assert r.status_code == 202 and r.get_json()["student"] == "carol"
    r = client.post("/api/v1/assignments/hw2/submissions", headers=auth,
                    data={"file": (io.BytesIO(REFERENCE + b"#\n"), "c.py"), "student": "carol"})
    assert r.status_code == 202, "an instructor may upload for a student"
    assert client.get("/api/v1/queue", headers=auth).get_json()["counts"] == {"queued": 2}


def test_status_shows_the_queue_position(sqlite_app):
    course = make_course(sqlite_app)
    client = sqlite_app.test_client()
    ids = [upload(client, course.alice if n % 2 else course.bob, REFERENCE + f"#{n}\n".encode()).get_json()["id"]
           for n in range(3)]
    positions = [client.get(f"/api/v1/submissions/{i}", headers=Course.auth(course.instructor)).get_json()
                 ["queue_position"] for i in ids]
    assert positions == [1, 2, 3]


def test_the_rubric_policy_limits_attempts_per_period(sqlite_app):
    from grader.app import scoring
    course = make_course(sqlite_app)
    allowed = scoring.policy().attempts
    client = sqlite_app.test_client()
    codes = [upload(client, course.alice, REFERENCE + f"#{n}\n".encode()).status_code for n in range(allowed + 1)]
    assert codes == [202] * allowed + [429], codes
    assert upload(client, course.alice, REFERENCE + f"#{allowed - 1}\n".encode()).status_code == 200, \
        "the latest file again is recognised, not refused"


def test_regrade_keeps_the_old_score_and_shows_the_change(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    good = {"split_heads": "pass", "attention_sdpa": "pass", "rope": "pass"}
    grading.grade(app, sid, judge=judge_returning(fake_report(good)))
    before = client.get(f"/api/v1/submissions/{sid}/result", headers=auth).get_json()
    assert client.post(f"/api/v1/submissions/{sid}/regrade", headers=auth).status_code == 202
    assert client.post(f"/api/v1/submissions/{sid}/regrade", headers=auth).status_code == 409
    grading.grade(app, sid, judge=judge_returning(fake_report({**good, "rope": "fail"})))
    after = client.get(f"/api/v1/submissions/{sid}/result", headers=auth).get_json()
    assert after["request"] == 2 and after["previous"]["request"] == 1
    assert after["previous"]["total"] == before["score"]["total"]
    assert after["score"]["total"] < before["score"]["total"], "failing rope must cost points"
    assert after["diff"]["totals"]["delta"] < 0 and any(r["status_after"] == "fail" for r in after["diff"]["items"])
    assert len(client.get(f"/api/v1/submissions/{sid}/results", headers=auth).get_json()) == 2
    mine = client.get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.alice)).get_json()
    shown = {i["id"] for c in mine["score"]["categories"] for i in c["items"]}
    assert mine["score"]["hidden"]["items"] > 0, "the capstone rubric hides some items until released"
    assert {r["id"] for r in mine["diff"]["items"]} <= shown, "a student's diff must not reveal hidden items"
    # the item that changed hidden: gone from the student's diff, still in the instructor's (the control)
    with app.app_context(), get_db(app).session() as s:
        visibility.set_rule(s, store.get_assignment(s, "cap"), "rope", "hidden")
    mine = client.get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(course.alice)).get_json()
    assert "rope" not in {r["id"] for r in mine["diff"]["items"]}, mine["diff"]
    assert mine["diff"]["totals"]["delta"] == 0, "nor its points, through the totals"
    theirs = client.get(f"/api/v1/submissions/{sid}/result", headers=auth).get_json()
    assert "rope" in {r["id"] for r in theirs["diff"]["items"]}, theirs["diff"]


def test_rescore_recomputes_from_stored_results_without_grading(app, course, monkeypatch):
    client, auth = app.test_client(), Course.auth(course.instructor)
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    grading.grade(app, sid, judge=judge_returning(fake_report({"split_heads": "pass"})))
    monkeypatch.setattr(grading, "run_judge", lambda *a, **k: pytest.fail("rescoring must not run the judge"))
    r = client.post("/api/v1/rescore", headers=auth, json={"assignment": "cap"})
    assert r.status_code == 200 and r.get_json()["rescored"] == 1
    with get_db(app).Session() as s:
        assert s.get(Submission, sid).status == "done"


def test_manual_grades_are_scored(app, course):
    from grader.app import scoring
    client, auth = app.test_client(), Course.auth(course.instructor)
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    grading.grade(app, sid, judge=judge_returning(fake_report({"split_heads": "pass"})))
    item = next(i for _, i in scoring.current_rubric().items() if i.kind == "manual")
    r = client.put(f"/api/v1/submissions/{sid}/manual", headers=auth,
                   json={item.id: {"points": item.points, "comment": "clear"}})
    assert r.status_code == 200, r.get_json()
    assert item.id not in r.get_json()["score"]["pending_manual"]


def test_export_has_a_row_per_student(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    grading.grade(app, sid, judge=judge_returning(fake_report({"split_heads": "pass"})))
    rows = client.get("/api/v1/assignments/cap/export", headers=auth).get_json()
    assert [(r["student"], r["submission"]) for r in rows] == [("alice", sid), ("bob", None)]
    csv_text = client.get("/api/v1/assignments/cap/export?format=csv", headers=auth).get_data(as_text=True)
    assert csv_text.splitlines()[0].startswith("student,") and len(csv_text.splitlines()) == 3


def test_the_openapi_document_describes_every_route(sqlite_app):
    doc = sqlite_app.test_client().get("/api/v1/openapi.json").get_json()
    assert doc["openapi"].startswith("3.1")
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    served = set()
    for rule in sqlite_app.url_map.iter_rules():
        if rule.rule.startswith("/api/v1"):
            path = rule.rule.replace("<int:", "{").replace("<", "{").replace(">", "}")
            served |= {(path, m.lower()) for m in rule.methods - {"HEAD", "OPTIONS"}}
    assert served == documented, f"served, not documented: {served - documented}; documented, not served: " \
                                 f"{documented - served}"


def test_an_upload_is_accepted_and_kept_while_redis_is_down(tmp_path, monkeypatch):
    import socket
    import time

    from .svc_helpers import make_app
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    app = make_app(f"sqlite:///{tmp_path}/g.sqlite", tmp_path, BROKER_URL=f"redis://127.0.0.1:{closed}/0")
    course = make_course(app)
    started = time.monotonic()
    r = upload(app.test_client(), course.alice, REFERENCE)
    assert r.status_code == 202 and r.get_json()["status"] == "queued", r.get_json()
    assert time.monotonic() - started < 10, "a broker that is down must not hold the upload for long"
    assert n_submissions(app) == 1, "the store keeps it; the sweeper sends it when Redis is back"
    get_db(app).engine.dispose()


def test_asking_for_the_result_of_an_ungraded_submission_answers_its_status(sqlite_app):
    """Queued: the verdicts so far (partial, tests/service/test_service_partial.py); failed: 404 not_graded."""
    course = make_course(sqlite_app)
    client = sqlite_app.test_client()
    sub_id = upload(client, course.alice, REFERENCE).get_json()["id"]
    r = client.get(f"/api/v1/submissions/{sub_id}/result", headers=Course.auth(course.alice))
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["partial"] is True and r.get_json()["status"] == "queued", r.get_json()
    with get_db(sqlite_app).session() as s:
        s.get(Submission, sub_id).status = "failed"
    r = client.get(f"/api/v1/submissions/{sub_id}/result", headers=Course.auth(course.alice))
    assert r.status_code == 404, r.get_json()
    assert r.get_json()["error"] == "not_graded" and r.get_json()["status"] == "failed", r.get_json()
