"""The status answer kept per web process (grader/app/status_cache.py): served again without SQL, dropped as soon as
anything it was made from changes, in this process or any other (PostgreSQL NOTIFY); never on SQLite."""
import time

import psycopg
import pytest
from sqlalchemy import update

from grader.app import status_cache
from grader.app.db import get_db
from grader.app.models import Submission
from .svc_helpers import Course, empty_tables, make_app, make_course
from .test_service_api import REFERENCE, upload
from .test_service_status import statements, status

pytestmark = pytest.mark.service


@pytest.fixture
def pg_app(pg_url, tmp_path, monkeypatch):
    """The app on the session's PostgreSQL database, emptied (the status cache is PostgreSQL's: NOTIFY)."""
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    application = make_app(pg_url, tmp_path)
    empty_tables(application)
    yield application
    get_db(application).engine.dispose()


@pytest.fixture
def course(pg_app) -> Course:
    return make_course(pg_app)


def listening(app, client, sid, token) -> status_cache.StatusCache:
    """The cache once its listener listens (it starts with the first poll)."""
    status(client, sid, token)
    cache = status_cache.for_app(app)
    deadline = time.monotonic() + 10
    while not cache.listening:
        assert time.monotonic() < deadline, "the status cache's listener did not start in 10 s"
        time.sleep(0.02)
    return cache


def until(check, what: str, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what} not seen within {timeout} s"
        time.sleep(0.01)


def other_connection(app):
    """A connection of another process's kind: nothing in this process hears its writes but the notification."""
    from sqlalchemy.engine import make_url
    url = make_url(get_db(app).url).set(drivername="postgresql").render_as_string(hide_password=False)
    return psycopg.connect(url, autocommit=True)


def test_a_repeated_poll_is_answered_without_sql(pg_app, course):
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    listening(pg_app, client, sid, course.alice)
    first = status(client, sid, course.alice)  # made after the listener listens: kept
    with statements(pg_app) as sent:
        again = status(client, sid, course.alice)
    assert sent == [], f"the second poll sent SQL: {sent}"
    assert again.get_json() == first.get_json() and again.headers["ETag"] == first.headers["ETag"]
    assert status(client, sid, course.alice, **{"If-None-Match": first.headers["ETag"]}).status_code == 304


def test_a_change_by_another_process_shows_at_once(pg_app, course):
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    listening(pg_app, client, sid, course.alice)
    assert status(client, sid, course.alice).get_json()["status"] == "queued"
    with other_connection(pg_app) as conn:
        conn.execute("UPDATE submissions SET status = 'running', started_at = now() WHERE id = %s", (sid,))
    until(lambda: status(client, sid, course.alice).get_json()["status"] == "running", "the running status")
    # and the queue position of a submission behind it moves when the one ahead is claimed
    behind = upload(client, course.bob, REFERENCE).get_json()["id"]
    ahead = status(client, behind, course.bob).get_json()["queue_position"]
    with other_connection(pg_app) as conn:
        conn.execute("UPDATE submissions SET status = 'done' WHERE id = %s", (sid,))
        conn.execute("UPDATE submissions SET status = 'running', started_at = now() WHERE id = %s", (behind,))
    until(lambda: status(client, behind, course.bob).get_json()["status"] == "running", "bob's claim")
    assert ahead == 1


def test_a_revoked_token_is_refused_although_its_answer_was_kept(pg_app, course):
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    listening(pg_app, client, sid, course.alice)
    assert status(client, sid, course.alice).status_code == 200
    with other_connection(pg_app) as conn:
        conn.execute("UPDATE tokens SET revoked_at = now() WHERE student_id IS NOT NULL")
    until(lambda: status(client, sid, course.alice).status_code == 401, "the revocation")


def test_a_kept_answer_is_never_served_to_another_token(pg_app, course):
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    listening(pg_app, client, sid, course.alice)
    assert status(client, sid, course.alice).status_code == 200
    assert status(client, sid, course.alice).status_code == 200
    assert status(client, sid, course.bob).status_code == 404  # another student's looks missing, kept or not
    assert status(client, sid, course.instructor).get_json()["worker"] is None  # the instructor's own view
    assert "worker" not in status(client, sid, course.alice).get_json()


def test_this_process_s_own_write_shows_without_waiting_for_the_notification(pg_app, course):
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    cache = listening(pg_app, client, sid, course.alice)
    status(client, sid, course.alice)
    before = cache.generation
    with pg_app.app_context(), get_db(pg_app).session() as s:
        s.execute(update(Submission).where(Submission.id == sid).values(status="running"))
    assert cache.generation > before  # emptied at the commit, before any notification is read
    assert status(client, sid, course.alice).get_json()["status"] == "running"


def test_no_cache_on_sqlite(sqlite_app):
    assert status_cache.for_app(sqlite_app) is None


def test_an_answer_made_while_the_data_changed_is_not_kept(pg_app, course):
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    cache = listening(pg_app, client, sid, course.alice)
    key = cache.key(course.alice, sid)
    cache.invalidate()
    mark = cache.mark()
    cache.invalidate()  # a notification read while the answer was being made
    cache.put(key, mark, b"{}", {})
    assert cache.get(key) is None
    cache.put(key, cache.mark(), b"{}", {})
    assert cache.get(key) == (b"{}", {})


def test_without_the_triggers_nothing_is_kept(pg_app):
    """A database the notifying migration has not (fully) reached: the listener refuses, every poll is made afresh."""
    cache = status_cache.StatusCache(status_cache.for_app(pg_app).url, tables=1000)  # more triggers than there are
    assert cache.mark() is None
    time.sleep(0.5)
    assert not cache.listening and cache.mark() is None


def test_an_unused_listener_gives_its_connection_back_and_the_next_poll_starts_another(pg_app, course):
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    cache = listening(pg_app, client, sid, course.alice)
    cache.used -= 2 * status_cache.IDLE_S  # as if nobody had polled for a minute
    until(lambda: cache.pid is None, "the idle listener stopping", timeout=15)
    assert not cache.listening and not cache.entries
    listening(pg_app, client, sid, course.alice)  # the next poll starts a new listener
