"""Recent status answers (GET /api/v1/submissions/ID), kept per web process and dropped when what they show changes.

A status poll otherwise costs a token lookup, the submission with its queue position, and JSON: several times
what the same server answers with a constant (bench/web_load.py), and pollers ask back to back. On PostgreSQL
triggers on every table the answer reads (migrations 0005 and 0007) NOTIFY `grader_status` when the writing
transaction commits, whichever process wrote it; a thread of each web process LISTENs and drops what each
notification names (a Change): a submission's own answers, and when it entered or left the queue (or moved in
it) the answers of every submission queued at or after it, whose positions moved; any other table's change drops
everything. So a deadline burst's uploads (each appended at the queue's end) and a grading's heartbeats leave the
other pollers' answers kept. An answer is kept only if no change that touches it came while it was being made
(the generation counter and the recent changes), so what is kept was true when the last notification was read;
it is also kept at most MAX_AGE_S (a feedback rule can change what a student may read by the clock alone). Without
the listener (SQLite, the triggers missing, the connection lost) nothing is kept or served from here. The key is
the token's hash and the submission id: an answer is only ever served to the token that was answered.
"""
import collections
import hashlib
import logging
import os
import select
import threading
import time
from datetime import datetime, timezone
from typing import NamedTuple

log = logging.getLogger(__name__)

MAX_AGE_S = 1.0
MAX_ENTRIES = 10000
RECENT = 1000  # changes remembered for answers being made; one made across more is not kept
SLACK_S = 1e-3  # the database's epoch and Python's may differ in the last digits: drop a little more, never less
RECONNECT_S = 1.0
IDLE_S = 30.0  # a listener no poll used for this long closes its connection; the next poll starts another


class Change(NamedTuple):
    """What changed: one submission's answers (None: every answer) and, from `queued_from` (seconds since the
    epoch) on, the queue positions of the submissions queued then or later."""

    submission: int | None
    queued_from: float | None = None

    def touches(self, submission_id: int, queued_at: float | None) -> bool:
        """Whether an answer for this submission, queued at `queued_at` (None: not queued), may be out of date."""
        if self.submission is None or self.submission == submission_id:
            return True
        return None not in (self.queued_from, queued_at) and queued_at >= self.queued_from - SLACK_S

    @classmethod
    def parse(cls, payload: str) -> "Change":
        """A notification's payload: "ID", "ID EPOCH" (migration 0007's row trigger), or anything else: everything."""
        parts = payload.split()
        try:
            if len(parts) in (1, 2):
                return cls(int(parts[0]), float(parts[1]) if len(parts) == 2 else None)
        except ValueError:
            pass
        return EVERYTHING


EVERYTHING = Change(None)


def epoch(moment: datetime | None) -> float | None:
    """A naive UTC time (models.utcnow) as seconds since the epoch, as the trigger writes it."""
    return None if moment is None else moment.replace(tzinfo=timezone.utc).timestamp()


class StatusCache:
    """Answers by submission id and token hash, valid while the listener listens; one per process."""

    def __init__(self, url: str, tables: int):
        self.url, self.tables = url, tables
        self.entries: dict[int, dict[str, tuple]] = {}  # submission id -> token hash -> (made, body, headers, queued)
        self.size = 0
        self.generation = 0
        self.recent: collections.deque = collections.deque(maxlen=RECENT)  # (generation, Change)
        self.listening = False
        self.pid = None
        self.used = time.monotonic()
        self.lock = threading.Lock()

    # ------------------------------------------------------------ serving
    def key(self, token: str, submission_id: int) -> tuple:
        return hashlib.sha256(token.encode()).hexdigest(), submission_id

    def get(self, key: tuple):
        """The kept answer (body, headers), or None."""
        self._ensure_listener()
        self.used = time.monotonic()
        if not self.listening:
            return None
        hit = self.entries.get(key[1], {}).get(key[0])
        if hit is None or time.monotonic() - hit[0] > MAX_AGE_S:
            return None
        return hit[1], hit[2]

    def mark(self) -> int | None:
        """Before making an answer: the generation it was made from (None: do not keep it)."""
        self._ensure_listener()
        self.used = time.monotonic()
        return self.generation if self.listening else None

    def put(self, key: tuple, mark: int | None, body: bytes, headers: dict, queued_at: float | None = None) -> None:
        """Keep an answer made from generation `mark`, for a submission queued at `queued_at` (None: not queued)."""
        token_hash, submission_id = key
        with self.lock:
            if mark is None or not self.listening or self.generation - mark > len(self.recent):
                return  # no listener, or more changes came meanwhile than are remembered
            for gen, change in reversed(self.recent):  # newest first: the changes made since the mark
                if gen <= mark:
                    break
                if change.touches(submission_id, queued_at):
                    return  # what the answer shows changed (or may have) while it was made
            if self.size >= MAX_ENTRIES:
                self._drop(lambda _submission_id, _answer: False)
                if self.size >= MAX_ENTRIES:
                    self.entries.clear()
                    self.size = 0
            answers = self.entries.setdefault(submission_id, {})
            self.size += token_hash not in answers
            answers[token_hash] = (time.monotonic(), body, headers, queued_at)

    def change(self, change: Change) -> None:
        """Drop the answers a change touches."""
        with self.lock:
            self.generation += 1
            self.recent.append((self.generation, change))
            if change.submission is None:
                self.entries.clear()
                self.size = 0
                return
            self.size -= len(self.entries.pop(change.submission, ()))
            if change.queued_from is not None:
                self._drop(lambda submission_id, answer: change.touches(submission_id, answer[3]))

    def _drop(self, touched) -> None:
        """Drop the answers `touched(submission id, answer)` names, and every answer too old to be served (so a scan
        costs the last second's answers, not every one ever kept). The caller holds the lock."""
        stale = time.monotonic() - MAX_AGE_S
        for submission_id, answers in list(self.entries.items()):
            for token_hash, answer in list(answers.items()):
                if answer[0] < stale or touched(submission_id, answer):
                    del answers[token_hash]
                    self.size -= 1
            if not answers:
                del self.entries[submission_id]

    def invalidate(self) -> None:
        """Drop every answer."""
        self.change(EVERYTHING)

    # ------------------------------------------------------------ listening
    def _ensure_listener(self) -> None:
        """One listener thread per process (gunicorn forks its workers after the app is made)."""
        if self.pid == os.getpid():
            return
        with self.lock:
            if self.pid == os.getpid():
                return
            self.pid, self.listening, self.entries, self.size = os.getpid(), False, {}, 0
            threading.Thread(target=self._listen, name="status-cache-listener", daemon=True).start()

    def _connect(self):
        import psycopg
        statements, rows = _migration("0005_status_notify"), _migration("0007_status_rows")
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
        found = conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname IN (%s, %s)",
                             (statements.FUNCTION, rows.FUNCTION)).fetchone()[0]
        if found < self.tables + 1:
            conn.close()
            raise MissingTriggers(f"{found} of {self.tables + 1} status triggers: migrations 0005 and 0007 are not "
                                  "applied")
        conn.add_notify_handler(lambda notify: self.change(Change.parse(notify.payload)))  # however it is read
        conn.execute(f"LISTEN {rows.CHANNEL}")
        return conn

    def _listen(self) -> None:
        while True:
            conn = None
            try:
                conn = self._connect()
                self.invalidate()  # anything kept before this LISTEN may have missed a notification
                self.listening = True
                while True:
                    select.select([conn.fileno()], [], [], 5.0)  # a notification came, or 5 s passed
                    conn.execute("SELECT 1")  # reads what came (the handler drops answers); raises if dead
                    with self.lock:
                        if time.monotonic() - self.used > IDLE_S:  # nobody polls: give the connection back
                            self.listening, self.pid, self.entries, self.size = False, None, {}, 0
                            self.generation += 1
                            conn.close()
                            return
            except Exception as exc:  # the database went away, or the triggers are missing: serve uncached
                if self.listening:
                    log.warning("status cache off until the database answers again: %s", exc)
                self.listening = False
                self.invalidate()
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
                time.sleep(60 * RECONNECT_S if isinstance(exc, MissingTriggers) else RECONNECT_S)
                with self.lock:
                    if time.monotonic() - self.used > IDLE_S:
                        self.pid = None  # nobody polls: stop trying; the next poll starts another listener
                        return


class MissingTriggers(RuntimeError):
    """The database has not the triggers that notify changes."""


def for_app(app) -> StatusCache | None:
    """The app's status cache (PostgreSQL only; None on SQLite or when STATUS_CACHE is off)."""
    cache = app.extensions.get("grader.status_cache", False)
    if cache is False:
        from .db import get_db
        db = get_db(app)
        cache = None
        if not db.is_sqlite and app.config.get("STATUS_CACHE", True):
            from sqlalchemy.engine import make_url
            url = make_url(db.url).set(drivername="postgresql").render_as_string(hide_password=False)
            cache = StatusCache(url, len(_tables()))
            _drop_on_own_commits(cache, {db.Session, db.ReadSession})
        app.extensions["grader.status_cache"] = cache
    return cache


def _drop_on_own_commits(cache: StatusCache, makers) -> None:
    """This process's own writes drop what they change at their commit, without waiting for their notification (a
    client that regrades and then polls the same web process sees the regrade). A read-only session's SQL text and
    bulk statements drop nothing (it writes nothing); a savepoint's end waits for the transaction's."""
    from sqlalchemy import event

    def flushed(s, _context):
        try:
            changes = own_changes(s)
        except Exception:  # never fail a write over what it should drop: drop everything
            log.exception("status cache: cannot tell what a flush changed")
            changes = [EVERYTHING]
        s.info.setdefault("status_changes", []).extend(changes)

    def executed(state):
        if not state.is_select and not state.session.info.get("reads"):  # a bulk UPDATE or DELETE, or SQL text
            state.session.info.setdefault("status_changes", []).append(EVERYTHING)  # what it touched is not known

    def committed(s):
        if s.in_nested_transaction():  # a savepoint released: nothing is committed yet
            return
        for change in set(s.info.pop("status_changes", ())):
            cache.change(change)

    def rolled_back(s, previous):
        if not previous.nested:  # back to a savepoint, the changes before it stand (and a few more dropped is no harm)
            s.info.pop("status_changes", None)

    for maker in makers:
        event.listen(maker, "after_flush", flushed)
        event.listen(maker, "do_orm_execute", executed)
        event.listen(maker, "after_commit", committed)
        event.listen(maker, "after_soft_rollback", rolled_back)


def own_changes(s) -> list[Change]:
    """What a flush changed of the status answers: for a submission, what migration 0007's trigger will say of it;
    for any other table the answers read, everything."""
    from .models import Submission
    tables, changes = set(_tables()), []
    for obj in (*s.new, *s.dirty, *s.deleted):
        if isinstance(obj, Submission):
            changes.append(submission_change(obj, obj in s.new, obj in s.deleted))
        elif getattr(obj, "__tablename__", None) in tables:
            changes.append(EVERYTHING)
    return changes


def submission_change(obj, new: bool, deleted: bool) -> Change:
    """A flushed submission's Change, from its attributes' history (in after_flush, still as before the flush): its
    queue time before the flush if it may have been queued then, and after if it may be queued now. A value not
    loaded here is not known, and a time not known where the submission may be queued means everything."""
    from sqlalchemy import inspect
    state = inspect(obj)
    submission_id = state.identity[0] if state.identity else obj.id
    status, queued = state.attrs.status.history, state.attrs.enqueued_at.history
    if not (new or deleted or status.has_changes() or queued.has_changes()):
        return Change(submission_id)  # its place in the queue as it was: no one else's position moved
    before = (not new, status.deleted or status.unchanged, queued.deleted or queued.unchanged)
    after = (not deleted, status.added or status.unchanged, queued.added or queued.unchanged)
    times = []
    for here, statuses, queue_times in (before, after):
        if not here or (statuses and "queued" not in statuses):
            continue  # no row then, or a row known not to be queued
        if not queue_times:
            return EVERYTHING
        times += [t for t in queue_times if t is not None]  # a queued row without a time is counted before no one
    return Change(submission_id, epoch(min(times)) if times else None)


def _tables() -> tuple:
    """The tables whose statement trigger notifies (migration 0005)."""
    return _migration("0005_status_notify").TABLES


def _migration(name: str):
    """A migration's module: the trigger, function and channel names are defined once, where they are made."""
    import importlib
    return importlib.import_module(f".migrations.versions.{name}", __package__)
