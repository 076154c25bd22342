"""Grading what counts, through the API and the store: regrade-all asks first and regrades the counted submissions
(or all), the manual-grading queue and its filters, graders round robin, comments on lines of the source."""
import io
from pathlib import Path

import pytest

from grader.app import accounts, grading as queue_store, store
from grader.app.db import get_db
from grader.app.models import Submission
from worker import grading

from .svc_helpers import Course, fake_report, judge_returning

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()
PASS = {"split_heads": "pass", "attention_sdpa": "pass", "rope": "pass"}
ITEMS = 10  # manual items of the packaged rubric


def upload(app, token, data: bytes, name="mine.py") -> int:
    r = app.test_client().post("/api/v1/assignments/cap/submissions", headers=Course.auth(token),
                               data={"file": (io.BytesIO(data), name)}, content_type="multipart/form-data")
    assert r.status_code == 202, r.get_json()
    return r.get_json()["id"]


@pytest.fixture
def graded(app, course):
    """alice: 1 passing (her best, so it counts), then 2 failing (her latest); bob: 3 queued, never graded."""
    first = upload(app, course.alice, REFERENCE + b"# one\n")
    grading.grade(app, first, judge=judge_returning(fake_report(PASS)))
    second = upload(app, course.alice, REFERENCE + b"# two\n")
    grading.grade(app, second, judge=judge_returning(fake_report({**PASS, "rope": "fail", "split_heads": "fail"})))
    third = upload(app, course.bob, REFERENCE + b"# bob\n")
    assert (first, second, third) == (1, 2, 3)
    return course


def api(app, course, method, path, **kw):
    return getattr(app.test_client(), method)("/api/v1" + path, headers=Course.auth(course.instructor), **kw)


def requests_of(app) -> dict:
    with get_db(app).Session() as s:
        return {sub.id: (sub.status, sub.request) for sub in store.list_submissions(s)}


# ---------------------------------------------------------------- regrade all

def test_regrade_all_first_answers_how_many_and_queues_nothing(app, graded):
    before = requests_of(app)
    r = api(app, graded, "post", "/assignments/cap/regrade", json={"which": "counted", "confirm": False})
    assert r.status_code == 200, r.get_json()
    d = r.get_json()
    assert (d["count"], d["submissions"], d["skipped"]["count"]) == (1, [1], 0), \
        f"alice's best (1) counts, not her latest (2); bob has nothing that counts yet: {d}"
    assert "would regrade 1 counted submission" in d["message"]
    assert requests_of(app) == before, "a dry run must not queue anything"
    r = api(app, graded, "post", "/assignments/cap/regrade")
    assert r.status_code == 200 and r.get_json()["confirm"] is False, "no body is a dry run too: it never just runs"
    assert requests_of(app) == before


def test_regrade_all_confirmed_regrades_the_counted_submission_not_the_latest(app, graded):
    r = api(app, graded, "post", "/assignments/cap/regrade", json={"confirm": True})
    assert r.status_code == 202 and r.get_json()["queued"] == [1], r.get_json()
    assert requests_of(app) == {1: ("queued", 2), 2: ("done", 1), 3: ("queued", 1)}


def test_regrade_all_by_choice_regrades_every_finished_submission_and_skips_the_queued(app, graded):
    d = api(app, graded, "post", "/assignments/cap/regrade", json={"which": "all"}).get_json()
    assert (d["count"], d["submissions"], d["skipped"]["submissions"]) == (2, [1, 2], [3]), d
    r = api(app, graded, "post", "/assignments/cap/regrade", json={"which": "all", "confirm": True})
    assert r.status_code == 202 and r.get_json()["queued"] == [1, 2]
    assert requests_of(app) == {1: ("queued", 2), 2: ("queued", 2), 3: ("queued", 1)}


def test_a_removed_students_counted_submission_is_not_regraded(app, graded):
    api(app, graded, "post", "/students/alice/remove")
    d = api(app, graded, "post", "/assignments/cap/regrade", json={"which": "counted"}).get_json()
    assert d["count"] == 0 and d["submissions"] == [], f"alice is off the roster and the gradebook: {d}"
    assert api(app, graded, "post", "/assignments/cap/regrade", json={"which": "all"}).get_json()["count"] == 2, \
        "every submission (by choice) still includes hers: they are kept"


@pytest.mark.parametrize("body, says", [({"which": "latest"}, 'which must be "counted" or "all"'),
                                        ({"confirm": "yes"}, "confirm must be true or false"),
                                        ([1, 2], "send a JSON object")])
def test_a_bad_regrade_request_is_named(sqlite_app, body, says):
    from .svc_helpers import make_course
    course = make_course(sqlite_app)
    r = api(sqlite_app, course, "post", "/assignments/cap/regrade", json=body)
    assert r.status_code == 400 and says in r.get_json()["message"], r.get_json()


def test_the_store_names_say_what_they_regrade(app, graded):
    with get_db(app).Session() as s:
        a = store.get_assignment(s, "cap")
        assert [sub.id for sub in store.regrade_counted(s, a)] == [1]
        assert [sub.id for sub in store.regrade_all(s, a)] == [2], "1 is queued now, 3 was: both skipped"


# ---------------------------------------------------------------- the queue

def test_the_queue_lists_the_counted_submissions_and_how_many_items_remain(app, graded):
    rows = api(app, graded, "get", "/assignments/cap/grading").get_json()
    assert [(r["submission"], r["student"], r["left"], r["items"]) for r in rows] == [(1, "alice", ITEMS, ITEMS)], \
        "only alice's counted submission (bob's is not graded, so nothing of his counts under 'best')"
    with get_db(app).Session() as s:
        from grader.app import scoring
        ids = [i.id for _, i in scoring.current_rubric().items() if i.kind == "manual"]
    r = api(app, graded, "put", "/submissions/1/manual", json={i: {"points": 1, "comment": ""} for i in ids[:-2]})
    assert r.status_code == 200, r.get_json()
    row = api(app, graded, "get", "/assignments/cap/grading").get_json()[0]
    assert (row["left"], row["left_items"]) == (2, ids[-2:]), row
    api(app, graded, "put", "/submissions/1/manual", json={i: {"points": 1, "comment": ""} for i in ids[-2:]})
    assert api(app, graded, "get", "/assignments/cap/grading").get_json() == [], "graded: out of 'needs grading'"
    graded_rows = api(app, graded, "get", "/assignments/cap/grading?show=graded").get_json()
    assert [(r["submission"], r["left"]) for r in graded_rows] == [(1, 0)]
    assert len(api(app, graded, "get", "/assignments/cap/grading?show=all").get_json()) == 1


def test_grading_a_non_counted_submission_does_not_put_it_in_the_queue(app, graded):
    api(app, graded, "put", "/submissions/2/manual", json={"spec_contract": {"points": 0, "comment": ""}})
    rows = api(app, graded, "get", "/assignments/cap/grading?show=all").get_json()
    assert [r["submission"] for r in rows] == [1]


@pytest.fixture
def three_graded(app, graded):
    """bob's submission graded too, carol with one; instructors ada and bea."""
    grading.grade(app, 3, judge=judge_returning(fake_report(PASS)))
    with get_db(app).Session() as s:
        carol = accounts.add_student(s, "carol", "Carol Chen")
        token = accounts.issue_token(s, "student", carol)[1]
        for name in ("ada", "bea"):  # PostgreSQL keeps instructors between tests (svc_helpers.TABLES)
            if name not in {i.username for i in queue_store.graders(s)}:
                accounts.create_instructor(s, name, "a long enough password", name.title())
        s.commit()
    grading.grade(app, upload(app, token, REFERENCE + b"# carol\n"), judge=judge_returning(fake_report(PASS)))
    return graded


def test_graders_are_assigned_round_robin_and_filter_the_queue(app, three_graded):
    c = three_graded
    r = api(app, c, "post", "/assignments/cap/grading/assign", json={"submissions": "unassigned",
                                                                     "graders": ["ada", "bea"]})
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["assigned"] == {"1": "ada", "3": "bea", "4": "ada"}, "round robin in queue order"
    mine = api(app, c, "get", "/assignments/cap/grading?grader=ada").get_json()
    assert [row["submission"] for row in mine] == [1, 4]
    assert api(app, c, "get", "/assignments/cap/grading?grader=unassigned").get_json() == []
    again = api(app, c, "post", "/assignments/cap/grading/assign", json={"submissions": "unassigned",
                                                                         "graders": ["bea"]})
    assert again.get_json()["assigned"] == {}, "nothing is unassigned any more"
    api(app, c, "post", "/assignments/cap/grading/assign", json={"submissions": [4], "graders": None})
    assert [row["submission"] for row in api(app, c, "get", "/assignments/cap/grading?grader=unassigned")
            .get_json()] == [4]
    found = api(app, c, "get", "/assignments/cap/grading?student=chen").get_json()
    assert [row["student"] for row in found] == ["carol"], "the student filter matches names too"


@pytest.mark.parametrize("body, status, says", [
    ({"submissions": [1], "graders": ["nobody"]}, 404, "no active instructor 'nobody'"),
    ({"submissions": [99], "graders": ["ada"]}, 404, "no submission 99 in assignment 'cap'"),
    ({"submissions": "unassigned", "graders": []}, 400, "name at least one grader"),
    ({"graders": ["ada"]}, 400, "name the submissions"),
    ({"submissions": ["1"], "graders": ["ada"]}, 400, "a list of submission ids"),
])
def test_a_bad_assignment_of_graders_is_named(app, three_graded, body, status, says):
    r = api(app, three_graded, "post", "/assignments/cap/grading/assign", json=body)
    assert r.status_code == status and says in r.get_json()["message"], r.get_json()


def test_students_cannot_see_the_queue_or_assign(app, graded):
    auth = Course.auth(graded.alice)
    client = app.test_client()
    assert client.get("/api/v1/assignments/cap/grading", headers=auth).status_code == 403
    assert client.post("/api/v1/assignments/cap/grading/assign", headers=auth,
                       json={"submissions": "unassigned", "graders": ["x"]}).status_code == 403


def test_next_and_previous_follow_the_queue_even_after_the_current_one_left_it(app, three_graded):
    with get_db(app).Session() as s:
        a = store.get_assignment(s, "cap")
        rows = queue_store.queue(s, a)
        assert [e.student.username for e in rows] == ["alice", "bob", "carol"]
        bob = queue_store.entry_for(s, s.get(Submission, 3))
        prev, nxt, place = queue_store.neighbours(rows, bob)
        assert (prev.id, nxt.id, place) == (1, 4, 2)
        left = [e for e in rows if e.id != 3]  # bob graded: gone from "needs grading"
        prev, nxt, place = queue_store.neighbours(left, bob)
        assert (prev.id, nxt.id, place) == (1, 4, None), "still between alice and carol, no longer counted in it"


# ---------------------------------------------------------------- comments on lines

def test_an_instructor_comments_on_a_line_and_the_student_reads_it(app, graded):
    r = api(app, graded, "post", "/submissions/1/comments", json={"line": 3, "text": "why transpose here?"})
    assert r.status_code == 201, r.get_json()
    client = app.test_client()
    mine = client.get("/api/v1/submissions/1/comments", headers=Course.auth(graded.alice))
    assert mine.status_code == 200
    assert [(c["line"], c["text"]) for c in mine.get_json()] == [(3, "why transpose here?")]
    assert "by" not in mine.get_json()[0], "students see the comment, not which grader's account wrote it"
    assert client.get("/api/v1/submissions/1/comments", headers=Course.auth(graded.bob)).status_code == 404, \
        "another student's comments look like a missing submission"
    assert client.post("/api/v1/submissions/1/comments", headers=Course.auth(graded.alice),
                       json={"line": 1, "text": "self-praise"}).status_code == 403
    cid = r.get_json()["id"]
    assert api(app, graded, "delete", f"/submissions/1/comments/{cid}").status_code == 204
    assert client.get("/api/v1/submissions/1/comments", headers=Course.auth(graded.alice)).get_json() == []
    assert api(app, graded, "delete", f"/submissions/2/comments/{cid}").status_code == 404


@pytest.mark.parametrize("body, says", [({"line": 0, "text": "x"}, "line must be a line number from 1 to"),
                                        ({"line": 10**6, "text": "x"}, "not 1000000"),
                                        ({"line": "three", "text": "x"}, "line must be a line number"),
                                        ({"line": 2, "text": "   "}, "the comment on line 2 is empty"),
                                        ({"line": 2, "text": "x" * 5000}, "at most 4000")])
def test_a_bad_comment_is_refused_with_the_reason(app, graded, body, says):
    r = api(app, graded, "post", "/submissions/1/comments", json=body)
    assert r.status_code == 400 and says in r.get_json()["message"], r.get_json()


def test_lines_are_numbered_as_python_numbers_them():
    sub = Submission(content=b"a = 1\r\nb = 2\n\x0cc = 3\rd = 4\n")
    assert queue_store.source_lines(sub) == ["a = 1", "b = 2", "\x0cc = 3", "d = 4"], \
        "CRLF, LF and CR end lines; a form feed does not (str.splitlines would say it does)"


def test_a_removed_student_leaves_the_queue(app, three_graded):
    from grader.app.models import Student, utcnow
    with get_db(app).Session() as s:
        s.query(Student).filter_by(username="bob").update({"removed_at": utcnow()})
        s.commit()
    rows = api(app, three_graded, "get", "/assignments/cap/grading").get_json()
    assert [r["student"] for r in rows] == ["alice", "carol"]
