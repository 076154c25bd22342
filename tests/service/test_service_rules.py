"""Course rules per assignment (issue 17): dates and grace, extensions, attempt limits, the counted submission
(best, latest, chosen), states, stored rubric versions and re-pinning, as the store and the JSON API apply them."""
import io
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.app import rules, store
from grader.app.db import get_db
from grader.app.models import Assignment, Submission, utcnow
from tests.support.rubrics import SMALL_RUBRIC
from worker import grading
from .svc_helpers import Course, fake_report, judge_returning, make_course

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()
GOOD = {"split_heads": "pass", "attention_sdpa": "pass", "rope": "pass"}


def z(dt: datetime) -> str:
    """A naive-UTC moment as the API takes it (with its zone)."""
    return dt.replace(microsecond=0).isoformat() + "Z"


def upload(client, token, data: bytes, slug="cap"):
    return client.post(f"/api/v1/assignments/{slug}/submissions", headers=Course.auth(token),
                       data={"file": (io.BytesIO(data), "mine.py")}, content_type="multipart/form-data")


def patch(client, course, slug="cap", **fields):
    return client.patch(f"/api/v1/assignments/{slug}", headers=Course.auth(course.instructor), json=fields)


def graded(app, client, token, n: int, at: datetime | None = None, report=None, slug="cap") -> int:
    """Upload a distinct file (n), optionally dated `at` (naive UTC), and grade it with a stand-in judge."""
    r = upload(client, token, REFERENCE + f"\n# {n}\n".encode(), slug)
    assert r.status_code == 202, r.get_json()
    sid = r.get_json()["id"]
    if at is not None:
        with get_db(app).session() as s:
            s.get(Submission, sid).created_at = at
    grading.grade(app, sid, judge=judge_returning(report or fake_report(GOOD)))
    return sid


def result(client, course, sid, token=None) -> dict:
    return client.get(f"/api/v1/submissions/{sid}/result", headers=Course.auth(token or course.instructor)).get_json()


def penalty(score: dict) -> float:
    return score.get("late_penalty", {}).get("fraction", 0.0)


# ---------------------------------------------------------------- the rules in force

def test_the_rules_default_to_the_packaged_rubric_policy_and_the_assignment_overrides_them(app, course):
    with app.app_context(), get_db(app).session() as s:
        a = store.get_assignment(s, "cap")
        r = rules.rules_for(s, a)
        assert (r.state, r.counts, r.attempts, r.period, r.grace_minutes, r.late_per_day, r.late_max) == \
            ("open", "best", 10, "day", 15.0, 0.1, 0.5), "the capstone rubric's [policy] is the default"
        assert r.due_at == datetime(2026, 12, 18, 23, 59, tzinfo=timezone.utc) and r.deadline == r.due_at
        store.update_assignment(s, "cap", due_at="2027-01-10T12:00:00+01:00", counts="latest", grace_minutes=0,
                                attempts_per_period=3, period="week")
        r = rules.rules_for(s, a)
        assert r.due_at == datetime(2027, 1, 10, 11, 0, tzinfo=timezone.utc), "the offset is converted to UTC"
        assert (r.counts, r.grace_minutes, r.attempts, r.period, r.late_per_day) == ("latest", 0.0, 3, "week", 0.1)
        store.update_assignment(s, "cap", counts=None)
        assert rules.rules_for(s, a).counts == "best", "null removes an override: the rubric's rule again"


@pytest.mark.parametrize("field,value,says", [
    ("due_at", "2026-12-18T23:59:00", "has no time zone"),
    ("due_at", "next friday", "ISO 8601"),
    ("opens_at", "2026-12-18", "has no time zone"),
    ("counts", "median", "best, latest, chosen"),
    ("late_penalty_per_day", 1.5, "fraction from 0 to 1"),
    ("attempts_per_period", -1, "whole number"),
    ("period", "month", "day, week, term"),
    ("timezone", "Mars/Olympus", "IANA name"),
    ("state", "hidden", "draft, open, closed, archived"),
    ("colour", "red", "unknown assignment field 'colour'"),
])
def test_a_bad_rule_is_refused_naming_it(sqlite_app, field, value, says):
    course = make_course(sqlite_app)
    r = patch(sqlite_app.test_client(), course, **{field: value})
    assert r.status_code == 400 and says in r.get_json()["message"], r.get_json()


def test_an_assignment_cannot_close_before_it_opens(sqlite_app):
    course = make_course(sqlite_app)
    r = patch(sqlite_app.test_client(), course, opens_at="2027-01-02T00:00:00Z", due_at="2027-01-01T00:00:00Z")
    assert r.status_code == 400 and "must be before due_at" in r.get_json()["message"]


# ---------------------------------------------------------------- dates, grace, extensions

def test_the_late_penalty_follows_the_due_date_and_grace(app, course):
    client = app.test_client()
    due = utcnow().replace(microsecond=0) - timedelta(days=5)
    assert patch(client, course, due_at=z(due), grace_minutes=15, late_penalty_per_day=0.1,
                 late_penalty_max=0.5).status_code == 200
    cases = [(due - timedelta(hours=1), 0.0, "before the due date"),
             (due + timedelta(minutes=14), 0.0, "within the grace minutes"),
             (due + timedelta(minutes=16), 0.1, "just after the grace: one started day"),
             (due + timedelta(days=1, minutes=16), 0.2, "two started days"),
             (due + timedelta(days=9), 0.5, "capped at late_penalty_max")]
    for n, (at, expected, why) in enumerate(cases):
        sid = graded(app, client, course.alice, n, at)
        assert penalty(result(client, course, sid)["score"]) == pytest.approx(expected), why


def test_a_late_upload_with_an_extension_has_no_penalty_without_one_it_has_the_configured_one(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    due = utcnow().replace(microsecond=0) - timedelta(days=2)
    patch(client, course, due_at=z(due), grace_minutes=0, late_penalty_per_day=0.25, late_penalty_max=1.0)
    r = client.put("/api/v1/assignments/cap/extensions/alice", headers=auth,
                   json={"due_at": z(due + timedelta(days=3)), "reason": "ill"})
    assert r.status_code == 200, r.get_json()
    late = due + timedelta(days=1, hours=1)  # two started days late
    alice = graded(app, client, course.alice, 1, late)
    bob = graded(app, client, course.bob, 2, late)
    assert penalty(result(client, course, alice)["score"]) == 0.0, "alice's extension covers the upload"
    assert penalty(result(client, course, bob)["score"]) == pytest.approx(0.5), "bob has no extension: 2 x 0.25"
    mine = client.get("/api/v1/assignments/cap", headers=Course.auth(course.alice)).get_json()
    assert mine["extended_until"] == z(due + timedelta(days=3)) and mine["late_fraction_now"] == 0.0
    assert client.get("/api/v1/assignments/cap", headers=Course.auth(course.bob)).get_json()["extended_until"] is None
    # Taking the extension away rescores alice's stored result (no code runs); giving one to bob clears his.
    r = client.delete("/api/v1/assignments/cap/extensions/alice", headers=auth)
    assert r.status_code == 200 and r.get_json()["rescored"] == 1
    assert penalty(result(client, course, alice)["score"]) == pytest.approx(0.5)
    client.put("/api/v1/assignments/cap/extensions/bob", headers=auth, json={"due_at": z(late + timedelta(hours=1))})
    assert penalty(result(client, course, bob)["score"]) == 0.0
    listed = client.get("/api/v1/assignments/cap/extensions", headers=auth).get_json()
    assert [(e["student"], e["due_at"]) for e in listed] == [("bob", z(late + timedelta(hours=1)))]
    assert client.delete("/api/v1/assignments/cap/extensions/alice", headers=auth).status_code == 404
    r = client.put("/api/v1/assignments/cap/extensions/alice", headers=auth, json={"reason": "nothing"})
    assert r.status_code == 400 and "needs a new due date" in r.get_json()["message"]


def test_a_student_reads_the_rules_in_the_assignment_but_never_the_seed(app):
    course = make_course(app, seed=1234)
    client = app.test_client()
    patch(client, course, due_at="2030-01-01T00:00:00Z", opens_at="2020-01-01T00:00:00Z", attempts_per_period=4)
    client.put("/api/v1/assignments/cap/extensions/alice", headers=Course.auth(course.instructor),
               json={"extra_attempts": 2})
    d = client.get("/api/v1/assignments/cap", headers=Course.auth(course.alice)).get_json()
    assert "seed" not in d
    assert (d["state"], d["opens_at"], d["due_at"], d["extended_until"]) == \
        ("open", "2020-01-01T00:00:00Z", "2030-01-01T00:00:00Z", None)
    assert d["late_policy"] == {"grace_minutes": 15.0, "per_day": 0.1, "max": 0.5}
    assert (d["counts"], d["attempts_per_period"], d["attempts_left"], d["period"]) == ("best", 6, 6, "day"), \
        "alice's extension adds 2 attempts to the 4"
    assert d["attempts_reset_at"].endswith("T00:00:00Z") and d["late_fraction_now"] == 0.0
    listed = client.get("/api/v1/assignments", headers=Course.auth(course.alice)).get_json()
    assert listed[0]["attempts_left"] == 6 and "seed" not in listed[0]
    assert client.get("/api/v1/assignments/cap", headers=Course.auth(course.instructor)).get_json()["seed"] == 1234


# ---------------------------------------------------------------- attempts

def test_attempts_are_counted_per_assignment_with_the_students_extra_attempts(app):
    course = make_course(app)
    make_course(app, slug="other")
    client = app.test_client()
    patch(client, course, attempts_per_period=2, period="term")
    client.put("/api/v1/assignments/cap/extensions/alice", headers=Course.auth(course.instructor),
               json={"extra_attempts": 1})
    for n in range(3):
        assert upload(client, course.alice, REFERENCE + f"#other {n}\n".encode(), "other").status_code == 202
    codes = {name: [upload(client, token, REFERENCE + f"#{n}\n".encode()).status_code for n in range(4)]
             for name, token in (("alice", course.alice), ("bob", course.bob))}
    assert codes == {"alice": [202, 202, 202, 429], "bob": [202, 202, 429, 429]}, \
        "2 per term, alice 1 more; her uploads to another assignment do not count"
    r = upload(client, course.bob, REFERENCE + b"#9\n")
    assert "used all 2 submissions allowed per term on 'cap'" in r.get_json()["message"]
    assert client.get("/api/v1/assignments/cap", headers=Course.auth(course.alice)).get_json()["attempts_left"] == 0


def test_too_many_names_when_the_next_attempt_is_allowed(sqlite_app):
    course = make_course(sqlite_app)
    client = sqlite_app.test_client()
    patch(client, course, attempts_per_period=1, period="day", timezone="UTC")
    assert upload(client, course.alice, REFERENCE).status_code == 202
    r = upload(client, course.alice, REFERENCE + b"#2\n")
    tomorrow = (utcnow() + timedelta(days=1)).date().isoformat()
    assert r.status_code == 429 and f"you can submit again from {tomorrow}T00:00+00:00" in r.get_json()["message"]


# ---------------------------------------------------------------- the counted submission

def totals_report(fail: tuple = ()):
    return fake_report({cid: "fail" if cid in fail else "pass" for cid in GOOD})


@pytest.mark.parametrize("counts", ["best", "latest", "chosen"])
def test_the_gradebook_counts_the_submission_the_rules_name(app, course, counts):
    client, auth = app.test_client(), Course.auth(course.instructor)
    assert patch(client, course, counts=counts).status_code == 200
    best = graded(app, client, course.alice, 1, report=totals_report())
    worse = graded(app, client, course.alice, 2, report=totals_report(fail=("rope", "attention_sdpa")))
    latest = graded(app, client, course.alice, 3, report=totals_report(fail=("rope",)))
    chose = client.post(f"/api/v1/submissions/{worse}/choose", headers=Course.auth(course.alice))
    if counts == "chosen":
        assert chose.status_code == 200 and chose.get_json()["chosen_at"], chose.get_json()
    else:
        assert chose.status_code == 409 and f"counts your {counts} submission" in chose.get_json()["message"]
    rows = {r["student"]: r for r in client.get("/api/v1/assignments/cap/export", headers=auth).get_json()}
    expected = {"best": best, "latest": latest, "chosen": worse}[counts]
    assert rows["alice"]["submission"] == expected and rows["alice"]["submissions"] == 3
    assert rows["bob"]["submission"] is None


def test_chosen_without_a_choice_counts_the_latest_and_only_the_owner_chooses(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    patch(client, course, counts="chosen")
    first = graded(app, client, course.alice, 1)
    second = graded(app, client, course.alice, 2)
    rows = {r["student"]: r["submission"] for r in client.get("/api/v1/assignments/cap/export", headers=auth).get_json()}
    assert rows["alice"] == second, "no choice yet: the latest counts"
    assert client.post(f"/api/v1/submissions/{first}/choose", headers=Course.auth(course.bob)).status_code == 404
    assert client.post(f"/api/v1/submissions/{first}/choose", headers=auth).status_code == 403
    assert client.post(f"/api/v1/submissions/{first}/choose", headers=Course.auth(course.alice)).status_code == 200
    with get_db(app).session() as s:
        a = s.query(Assignment).filter_by(slug="cap").one()
        assert rules.counted_submission(s, a, s.get(Submission, first).student).id == first, "the newest choice"


def test_removed_students_are_off_the_gradebook(app, course):
    client, auth = app.test_client(), Course.auth(course.instructor)
    graded(app, client, course.bob, 1)
    with get_db(app).session() as s:
        from grader.app import accounts
        accounts.get_student(s, "bob").removed_at = utcnow()
    assert [r["student"] for r in client.get("/api/v1/assignments/cap/export", headers=auth).get_json()] == ["alice"]


# ---------------------------------------------------------------- states

def test_states_decide_what_students_see_and_may_upload(app, course):
    client, auth, alice = app.test_client(), Course.auth(course.instructor), Course.auth(course.alice)
    later = utcnow().replace(microsecond=0) + timedelta(days=2)

    def seen():
        return [a["slug"] for a in client.get("/api/v1/assignments", headers=alice).get_json()]
    patch(client, course, state="draft")
    assert seen() == [] and client.get("/api/v1/assignments/cap", headers=alice).status_code == 404
    assert upload(client, course.alice, REFERENCE).status_code == 404, "a draft does not exist for students"
    assert client.get("/api/v1/assignments/cap/submissions", headers=alice).status_code == 404
    assert client.get("/api/v1/assignments/cap", headers=auth).get_json()["state"] == "draft"

    patch(client, course, state="open", opens_at=z(later))
    d = client.get("/api/v1/assignments/cap", headers=alice).get_json()
    assert seen() == ["cap"] and d["opens_at"] == z(later) and d["accepting_uploads"] is False
    r = upload(client, course.alice, REFERENCE)
    assert r.status_code == 403 and f"opens at {later.isoformat(timespec='minutes')}" in r.get_json()["message"]
    assert upload(client, course.instructor, REFERENCE).status_code == 400, "instructors name the student"

    patch(client, course, opens_at=None, state="closed")
    r = upload(client, course.alice, REFERENCE)
    assert r.status_code == 403 and "closed" in r.get_json()["message"] and seen() == ["cap"]

    patch(client, course, state="open")
    assert upload(client, course.alice, REFERENCE).status_code == 202

    patch(client, course, state="archived")
    assert seen() == [] and client.get("/api/v1/assignments/cap", headers=alice).status_code == 404
    assert client.get("/api/v1/assignments", headers=auth).get_json() == [], "archived: off the default list"
    assert [a["slug"] for a in client.get("/api/v1/assignments?all=1", headers=auth).get_json()] == ["cap"]


def test_an_instructor_uploads_for_a_student_even_when_the_assignment_is_closed(sqlite_app):
    course = make_course(sqlite_app)
    client = sqlite_app.test_client()
    patch(client, course, state="closed")
    r = client.post("/api/v1/assignments/cap/submissions", headers=Course.auth(course.instructor),
                    data={"file": (io.BytesIO(REFERENCE), "a.py"), "student": "alice"})
    assert r.status_code == 202, r.get_json()


# ---------------------------------------------------------------- rubric versions

def test_a_bad_rubric_is_refused_with_the_line_of_each_problem(sqlite_app):
    course = make_course(sqlite_app)
    client, auth = sqlite_app.test_client(), Course.auth(course.instructor)
    bad = SMALL_RUBRIC.replace('check = "causality"', 'check = "causalty"')
    line = bad.splitlines().index('check = "causalty"') + 1
    r = client.post("/api/v1/rubrics", headers=auth, json={"rubric": bad, "filename": "mine.toml"})
    assert r.status_code == 400 and f"mine.toml, line {line - 1}" in r.get_json()["message"], r.get_json()
    r = patch(client, course, rubric="version = \n", rubric_filename="broken.toml")
    assert r.status_code == 400 and "broken.toml: not valid TOML" in r.get_json()["message"] \
        and "line 1" in r.get_json()["message"], r.get_json()
    assert client.get("/api/v1/rubrics", headers=auth).get_json() == [], "a refused rubric is not stored"


def test_the_same_rubric_text_is_one_stored_version(sqlite_app):
    course = make_course(sqlite_app)
    client, auth = sqlite_app.test_client(), Course.auth(course.instructor)
    first = client.post("/api/v1/rubrics", headers=auth, json={"rubric": SMALL_RUBRIC})
    again = client.post("/api/v1/rubrics", headers=auth, json={"rubric": SMALL_RUBRIC})
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.get_json()["id"] == again.get_json()["id"] and first.get_json()["version"] == "t.1"
    r = patch(client, course, rubric_id=first.get_json()["id"])
    assert r.status_code == 200 and r.get_json()["rubric"]["id"] == first.get_json()["id"]
    assert r.get_json()["rubric_version"] == "t.1"
    assert patch(client, course, rubric_id=999).status_code == 404


def test_a_new_rubric_repins_and_rescores_the_stored_results_without_grading(app, course, monkeypatch):
    client = app.test_client()
    sid = graded(app, client, course.alice, 1)
    before = result(client, course, sid)
    assert before["rubric_version"] == "2026-11-29.1"
    monkeypatch.setattr(grading, "run_judge", lambda *a, **k: pytest.fail("rescoring must not run the judge"))
    r = patch(client, course, rubric=SMALL_RUBRIC, rubric_filename="small.toml")
    assert r.status_code == 200 and r.get_json()["rescored"] == 1, r.get_json()
    after = result(client, course, sid)
    assert after["rubric_version"] == "t.1" and after["score"]["max"] == 10, "scored by the pinned rubric now"
    assert patch(client, course, title="renamed").get_json()["rescored"] is None, "a title changes no score"
    r = patch(client, course, rubric=None)
    assert r.get_json()["rescored"] == 1 and result(client, course, sid)["rubric_version"] == "2026-11-29.1", \
        "null pins the packaged rubric again"
    with get_db(app).session() as s:
        assert s.get(Submission, sid).request == 1, "no regrade was requested"


def test_the_rubric_last_counts_as_latest(sqlite_app):
    course = make_course(sqlite_app)
    client = sqlite_app.test_client()
    text = SMALL_RUBRIC.replace('total = 10\n', 'total = 10\n\n[policy]\ncounts = "last"\n', 1)
    assert patch(client, course, rubric=text).status_code == 200
    assert client.get("/api/v1/assignments/cap", headers=Course.auth(course.alice)).get_json()["counts"] == "latest"


def test_manual_grades_are_checked_against_the_pinned_rubric(app, course):
    from grader.app import coursework
    client = app.test_client()
    sid = graded(app, client, course.alice, 1)
    patch(client, course, rubric=SMALL_RUBRIC)
    with app.app_context(), get_db(app).session() as s:
        sub = s.get(Submission, sid)
        with pytest.raises(store.StoreError, match="'spec_contract' is not a manual item of rubric t.1"):
            coursework.grade_manual(s, sub, {"spec_contract": {"points": 1}}, None)
        row = coursework.grade_manual(s, sub, {"written": {"points": 3, "comment": "clear"}}, None)
        assert row.rubric_version == "t.1" and "written" not in row.score["pending_manual"]


def test_overrides_may_come_as_one_rules_object(sqlite_app):
    course = make_course(sqlite_app)
    client, auth = sqlite_app.test_client(), Course.auth(course.instructor)
    r = patch(client, course, rules={"counts": "chosen", "grace_minutes": 5})
    assert r.status_code == 200 and r.get_json()["rules"] == {"counts": "chosen", "grace_minutes": 5.0}
    assert r.get_json()["late_policy"]["grace_minutes"] == 5.0 and r.get_json()["counts"] == "chosen"
    r = patch(client, course, rules={"grace": 5})
    assert r.status_code == 400 and "unknown rule 'grace'" in r.get_json()["message"]
    r = patch(client, course, rules={"counts": None})
    assert r.get_json()["rules"] == {"grace_minutes": 5.0} and r.get_json()["counts"] == "best"
    assert client.get("/api/v1/assignments/cap", headers=auth).get_json()["rules"] == {"grace_minutes": 5.0}


def test_a_student_cannot_change_the_rules_or_give_themselves_an_extension(app, course):
    client, mine = app.test_client(), Course.auth(course.alice)
    later = "2030-01-01T00:00:00+00:00"
    assert client.put("/api/v1/assignments/cap/extensions/alice", headers=mine,
                      json={"due_at": later, "extra_attempts": 99}).status_code == 403
    assert client.get("/api/v1/assignments/cap/extensions", headers=mine).status_code == 403
    assert client.patch("/api/v1/assignments/cap", headers=mine, json={"due_at": later}).status_code == 403
    assert client.get("/api/v1/assignments/cap", headers=mine).get_json()["extended_until"] is None, \
        "nothing was stored"
