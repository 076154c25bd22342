"""The status answer kept per web process (grader/app/status_cache.py): served again without SQL, dropped as soon as
anything it was made from changes, in this process or any other (PostgreSQL NOTIFY); never on SQLite."""
import time
from datetime import datetime

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


def bulk_update(s, sid):
    s.execute(update(Submission).where(Submission.id == sid).values(status="running"))


def loaded_change(s, sid):
    s.get(Submission, sid).status = "running"


@pytest.mark.parametrize("write", [bulk_update, loaded_change])
def test_this_process_s_own_write_shows_without_waiting_for_the_notification(pg_app, course, write):
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    cache = listening(pg_app, client, sid, course.alice)
    status(client, sid, course.alice)
    before = cache.generation
    with pg_app.app_context(), get_db(pg_app).session() as s:
        write(s, sid)
        s.commit()
        assert cache.generation > before  # dropped at the commit, before any notification is read
    assert status(client, sid, course.alice).get_json()["status"] == "running"


def test_a_write_before_the_first_poll_is_seen_by_the_cache_at_its_commit(pg_app, course):
    """The hooks on this process's sessions are there from the app's start, not from the first status poll."""
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    cache = pg_app.extensions["grader.status_cache"]  # made by create_app; no poll yet
    assert cache is not None and not cache.listening
    before = cache.generation
    with pg_app.app_context(), get_db(pg_app).session() as s:
        loaded_change(s, sid)
        s.flush()
        s.commit()
    assert cache.generation > before, "the commit made before any poll was not seen by the cache"


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


def notified(cache, before: int, submission_id: int | None = None, count: int = 1):
    """Wait until the cache has read `count` changes after generation `before` (naming submission_id, if given)."""
    until(lambda: sum(gen > before and (submission_id is None or change.submission == submission_id)
                      for gen, change in list(cache.recent)) >= count, "the change's notification")


def test_another_submission_s_heartbeat_keeps_the_answer(pg_app, course):
    client = pg_app.test_client()
    mine = upload(client, course.alice, REFERENCE).get_json()["id"]
    other = upload(client, course.bob, REFERENCE).get_json()["id"]
    cache = listening(pg_app, client, mine, course.alice)
    kept = status(client, mine, course.alice)
    before = cache.generation
    with other_connection(pg_app) as conn:  # a worker's heartbeat and live verdict on bob's running submission
        conn.execute("UPDATE submissions SET status = 'running', heartbeat_at = now() WHERE id = %s", (other,))
        conn.execute("UPDATE submissions SET current_check = 'split_heads' WHERE id = %s", (other,))
    notified(cache, before, other)
    with statements(pg_app) as sent:
        again = status(client, mine, course.alice)
    assert sent == [], f"bob's grading dropped alice's answer: {sent}"
    assert again.get_json() == kept.get_json()


def test_an_upload_keeps_the_answers_queued_before_it(pg_app, course):
    client = pg_app.test_client()
    mine = upload(client, course.alice, REFERENCE).get_json()["id"]
    cache = listening(pg_app, client, mine, course.alice)
    assert status(client, mine, course.alice).get_json()["queue_position"] == 1
    before = cache.generation
    bob = upload(client, course.bob, REFERENCE).get_json()["id"]
    notified(cache, before, bob, count=2)  # this process's own commit, then the trigger's notification
    with statements(pg_app) as sent:
        assert status(client, mine, course.alice).get_json()["queue_position"] == 1
    assert sent == [], f"bob's upload dropped alice's answer: {sent}"


def test_a_claim_ahead_moves_the_kept_positions_behind_it(pg_app, course):
    client = pg_app.test_client()
    ahead = upload(client, course.alice, REFERENCE).get_json()["id"]
    behind = upload(client, course.bob, REFERENCE).get_json()["id"]
    cache = listening(pg_app, client, behind, course.bob)
    assert status(client, behind, course.bob).get_json()["queue_position"] == 2
    assert status(client, behind, course.bob).get_json()["queue_position"] == 2
    assert behind in cache.entries
    before = cache.generation
    with other_connection(pg_app) as conn:  # a worker claims alice's
        conn.execute("UPDATE submissions SET status = 'running', started_at = now() WHERE id = %s", (ahead,))
    notified(cache, before, ahead)  # at once, not once the kept answer has aged out
    assert behind not in cache.entries
    assert status(client, behind, course.bob).get_json()["queue_position"] == 1


def test_a_submission_queued_before_a_kept_answer_moves_it(pg_app, course):
    """Another process's regrade committed after bob's upload but sent to the queue before it (two processes'
    clocks, or a commit that waited): bob's kept position is dropped."""
    client = pg_app.test_client()
    earlier = upload(client, course.alice, REFERENCE).get_json()["id"]
    with other_connection(pg_app) as conn:
        conn.execute("UPDATE submissions SET status = 'done' WHERE id = %s", (earlier,))
    behind = upload(client, course.bob, REFERENCE).get_json()["id"]
    cache = listening(pg_app, client, behind, course.bob)
    until(lambda: status(client, behind, course.bob).get_json()["queue_position"] == 1, "bob first in the queue")
    assert status(client, behind, course.bob).get_json()["queue_position"] == 1
    assert behind in cache.entries
    before = cache.generation
    with other_connection(pg_app) as conn:
        conn.execute("UPDATE submissions SET status = 'queued', enqueued_at = "
                     "(SELECT enqueued_at FROM submissions WHERE id = %s) - interval '1 second' WHERE id = %s",
                     (behind, earlier))
    notified(cache, before, earlier)
    assert behind not in cache.entries
    assert status(client, behind, course.bob).get_json()["queue_position"] == 2


def test_the_row_trigger_names_the_row_and_when_the_queue_moved(pg_app, course):
    client = pg_app.test_client()
    with other_connection(pg_app) as listener, other_connection(pg_app) as writer:
        listener.execute(f"LISTEN {status_cache._migration('0007_status_rows').CHANNEL}")
        sid = upload(client, course.alice, REFERENCE).get_json()["id"]
        other = upload(client, course.bob, REFERENCE).get_json()["id"]
        queued_at = dict(writer.execute("SELECT id, extract(epoch FROM enqueued_at) FROM submissions").fetchall())
        writer.execute("UPDATE submissions SET heartbeat_at = now() WHERE id = %s", (sid,))
        writer.execute("UPDATE submissions SET status = 'running' WHERE id = %s", (sid,))
        writer.execute("DELETE FROM submissions WHERE id = %s", (other,))
        writer.execute("UPDATE tokens SET revoked_at = NULL WHERE false")
        payloads = [n.payload for n in listener.notifies(timeout=2, stop_after=6)]
    changes = [status_cache.Change.parse(p) for p in payloads]
    moved = [(c.submission, round(c.queued_from, 3) if c.queued_from else None) for c in changes]
    assert moved[:2] == [(sid, round(float(queued_at[sid]), 3)), (other, round(float(queued_at[other]), 3))]  # in
    assert changes[2] == status_cache.Change(sid)  # a heartbeat: its own answers only
    assert moved[3:5] == [(sid, round(float(queued_at[sid]), 3)), (other, round(float(queued_at[other]), 3))]  # out
    assert changes[5] == status_cache.EVERYTHING  # any other table's statement


def test_this_process_s_own_flush_says_what_the_trigger_will(pg_app, course):
    """What a commit in this process drops before its notification comes (a cache without a listener records it)."""
    from sqlalchemy.orm import sessionmaker
    client = pg_app.test_client()
    first = upload(client, course.alice, REFERENCE).get_json()["id"]
    second = upload(client, course.bob, REFERENCE).get_json()["id"]
    cache = status_cache.StatusCache("postgresql://unused", tables=0)
    maker = sessionmaker(get_db(pg_app).engine, expire_on_commit=False)
    status_cache._drop_on_own_commits(cache, {maker})

    def committed(write) -> list:
        before = cache.generation
        with maker() as s:
            write(s)
            s.commit()
        return [change for gen, change in cache.recent if gen > before]
    with maker() as s:
        times = {sub.id: status_cache.epoch(sub.enqueued_at) for sub in s.query(Submission)}

    def claim(s):
        s.get(Submission, first).status = "running"
    assert committed(claim) == [status_cache.Change(first, times[first])]  # the queue behind it moved

    def heartbeat(s):
        s.get(Submission, second).heartbeat_at = datetime.now()
    assert committed(heartbeat) == [status_cache.Change(second)]

    def regrade(s):
        sub = s.get(Submission, first)
        sub.status, sub.enqueued_at = "queued", datetime(2030, 1, 1)
    assert committed(regrade) == [status_cache.Change(first, status_cache.epoch(datetime(2030, 1, 1)))]

    def rolled_back(s):
        s.get(Submission, second).status = "running"
        s.flush()
        s.rollback()
    assert committed(rolled_back) == []

    def savepoint(s):
        released_at = cache.generation
        with s.begin_nested():
            s.get(Submission, second).status = "running"
        assert cache.generation == released_at  # a savepoint's release commits nothing yet
    assert committed(savepoint) == [status_cache.Change(second, times[second])]

    def back_to_a_savepoint(s):
        s.get(Submission, first).heartbeat_at = datetime.now()
        s.flush()
        with pytest.raises(ZeroDivisionError), s.begin_nested():
            s.get(Submission, second).heartbeat_at = datetime.now()
            s.flush()
            1 / 0
    assert status_cache.Change(first) in committed(back_to_a_savepoint)  # what came before the savepoint stands

    def bulk(s):
        s.execute(update(Submission).where(Submission.id == second).values(status="queued"))
    assert committed(bulk) == [status_cache.EVERYTHING]


def test_a_change_touches_its_own_answers_and_the_queue_after_it():
    Change = status_cache.Change
    assert Change.parse("") == Change.parse("not a change") == status_cache.EVERYTHING
    assert Change.parse("7") == Change(7) and Change.parse("7 1700000000.25") == Change(7, 1700000000.25)
    assert Change(7).touches(7, None) and not Change(7).touches(8, 1.0)
    moved = Change(7, 100.0)
    assert moved.touches(8, 100.0) and moved.touches(8, 150.0) and not moved.touches(8, 99.0)
    assert not moved.touches(8, None)  # not queued: no position to move
    assert status_cache.EVERYTHING.touches(8, None)


def test_a_read_request_drops_nothing(pg_app, course):
    """The health check sends SQL text, whose effect the cache cannot see; a read request's is none by definition."""
    client = pg_app.test_client()
    sid = upload(client, course.alice, REFERENCE).get_json()["id"]
    listening(pg_app, client, sid, course.alice)
    status(client, sid, course.alice)
    assert client.get("/api/v1/health").status_code == 200
    with statements(pg_app) as sent:
        status(client, sid, course.alice)
    assert sent == [], f"a health check dropped the kept answer: {sent}"


def test_a_queue_change_drops_the_answers_behind_it_and_those_too_old_to_serve():
    cache = status_cache.StatusCache("postgresql://unused", tables=0)
    cache.listening = True  # as if the listener listened: put() keeps answers
    for sid, queued_at in ((1, 10.0), (2, 20.0), (3, None), (4, 5.0)):
        cache.put(("token", sid), cache.generation, b"{}", {}, queued_at)
    old = cache.entries[4]["token"]
    cache.entries[4]["token"] = (old[0] - 2 * status_cache.MAX_AGE_S, *old[1:])  # made two seconds ago
    cache.change(status_cache.Change(9, 15.0))  # a submission queued at 15 s was claimed
    assert sorted(cache.entries) == [1, 3] and cache.size == 2  # 2 was behind it; 4 could no longer be served
    cache.put(("token", 2), cache.generation - 1, b"{}", {}, 20.0)  # made before that change: not kept
    cache.put(("token", 5), cache.generation - 1, b"{}", {}, 1.0)  # ahead of it: kept
    assert sorted(cache.entries) == [1, 3, 5] and cache.size == 3
