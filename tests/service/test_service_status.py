"""The status poll is cheap: two SQL statements, never the uploaded file, an ETag that answers 304, reads that end
with COMMIT (so the driver keeps its prepared statements); on SQLite and on PostgreSQL."""
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import event, update

from grader.app import store
from grader.app.db import get_db
from grader.app.models import Submission
from worker import grading
from .svc_helpers import Course, fake_report, judge_returning
from .test_service_api import REFERENCE, URL, upload


@contextmanager
def statements(app):
    """The SQL text of every statement the app sends while the block runs."""
    sent = []

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append(statement)
    engine = get_db(app).engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def reads_file(sql: str) -> bool:
    return "submissions.content" in sql or "submissions_1.content" in sql


def status(client, sid: int, token: str, **headers):
    return client.get(f"/api/v1/submissions/{sid}", headers={**Course.auth(token), **headers})


def test_a_status_poll_is_two_statements_and_never_loads_the_file(app, course):
    client = app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    for token in (course.alice, course.instructor):
        with statements(app) as sent:
            r = status(client, sid, token)
        assert r.status_code == 200 and r.get_json()["queue_position"] == 1
        assert len(sent) == 2, f"token lookup and one query (with the queue position) expected, got {sent}"
        assert not any(reads_file(sql) for sql in sent), f"a status poll loaded the uploaded file: {sent}"
    file = client.get(f"/api/v1/submissions/{sid}/file", headers=Course.auth(course.alice))
    assert file.status_code == 200 and file.data == REFERENCE, "the file is still loaded where it is asked for"


def test_a_listing_never_loads_the_files_and_costs_the_same_for_more_submissions(app, course):
    client = app.test_client()
    counts = []
    for n in range(1, 4):
        upload(client, course.alice, REFERENCE + f"# {n}\n".encode())
        with statements(app) as sent:
            listed = client.get(URL, headers=Course.auth(course.instructor)).get_json()
        assert [s["queue_position"] for s in listed] == list(range(1, n + 1))
        assert not any(reads_file(sql) for sql in sent), f"a listing loaded the uploaded files: {sent}"
        counts.append(len(sent))
    assert len(set(counts)) == 1, f"statements per listing grew with the submissions: {counts}"


def test_the_queue_position_counts_ties_by_id_and_ignores_other_states(app, course):
    client = app.test_client()
    ids = [upload(client, course.alice if n % 2 else course.bob, REFERENCE + f"#{n}\n".encode()).get_json()["id"]
           for n in range(4)]
    with get_db(app).session() as s:  # the same enqueue time for all: the id decides
        s.execute(update(Submission).values(enqueued_at=datetime(2026, 1, 1)))
    grading.grade(app, ids[0], judge=judge_returning(fake_report({"split_heads": "pass"})))
    positions = [status(client, i, course.instructor).get_json()["queue_position"] for i in ids]
    assert positions == [None, 1, 2, 3]
    with get_db(app).Session() as s:  # a submission loaded some other way counts the same
        assert [store.queue_position(s, s.get(Submission, i)) for i in ids] == positions


def test_the_status_has_an_etag_and_answers_304_until_it_changes(app, course):
    client = app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    first = status(client, sid, course.alice)
    etag = first.headers["ETag"]
    assert first.headers["Cache-Control"] == "private, no-cache" and "Authorization" in first.headers["Vary"]
    assert first.headers["Retry-After"] == "2", "while queued the answer says when to ask again"
    same = status(client, sid, course.alice, **{"If-None-Match": etag})
    assert same.status_code == 304 and same.data == b"" and same.headers["ETag"] == etag
    assert status(client, sid, course.bob, **{"If-None-Match": etag}).status_code == 404, \
        "another student's submission stays a 404, whatever ETag is sent"
    grading.grade(app, sid, judge=judge_returning(fake_report({"split_heads": "pass"})))
    done = status(client, sid, course.alice, **{"If-None-Match": etag})
    assert done.status_code == 200 and done.get_json()["status"] == "done" and done.headers["ETag"] != etag
    assert "Retry-After" not in done.headers, "a finished submission has nothing to wait for"


def test_reads_end_with_commit_and_a_refused_upload_with_rollback(app, course):
    client = app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    ended = []
    engine = get_db(app).engine
    listeners = {"commit": lambda conn: ended.append("commit"), "rollback": lambda conn: ended.append("rollback")}
    for name, fn in listeners.items():
        event.listen(engine, name, fn)
    try:
        assert status(client, sid, course.alice).status_code == 200
        assert ended == ["commit"], f"a read should end with COMMIT (psycopg keeps its prepared statements): {ended}"
        ended.clear()
        assert upload(client, course.alice, b"TRACK = 'lm'\ndef broken(:\n").status_code == 422
        assert "commit" not in ended, f"a refused upload must not commit: {ended}"
    finally:
        for name, fn in listeners.items():
            event.remove(engine, name, fn)
