"""Recent status answers (GET /api/v1/submissions/ID), kept per web process and dropped whenever the data changes.

A status poll otherwise costs a token lookup, the submission with its queue position, and JSON: several times
what the same server answers with a constant (bench/web_load.py), and pollers ask back to back. On PostgreSQL a
statement trigger on every table the answer reads (migration 0005) NOTIFYs `grader_status` when the writing
transaction commits, whichever process wrote it; a thread of each web process LISTENs and empties the cache at
each notification. An answer is kept only if no notification came while it was being made (the generation
counter), so what is kept was true when the last notification was read; it is also kept at most MAX_AGE_S (a
feedback rule can change what a student may read by the clock alone). Without the listener (SQLite, the triggers
missing, the connection lost) nothing is kept or served from here. The key is the token's hash and the submission
id: an answer is only ever served to the token that was answered.
"""
import hashlib
import logging
import os
import select
import threading
import time

log = logging.getLogger(__name__)

CHANNEL = "grader_status"
TRIGGER = "grader_status_changed"
MAX_AGE_S = 1.0
MAX_ENTRIES = 10000
RECONNECT_S = 1.0
IDLE_S = 30.0  # a listener no poll used for this long closes its connection; the next poll starts another


class StatusCache:
    """Answers by (token hash, submission id), valid while the listener listens; one per process."""

    def __init__(self, url: str, tables: int):
        self.url, self.tables = url, tables
        self.entries: dict[tuple, tuple] = {}
        self.generation = 0
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
        hit = self.entries.get(key)
        if hit is None or time.monotonic() - hit[0] > MAX_AGE_S:
            return None
        return hit[1], hit[2]

    def mark(self) -> int | None:
        """Before making an answer: the generation it must still be at to be kept (None: do not keep)."""
        self._ensure_listener()
        self.used = time.monotonic()
        return self.generation if self.listening else None

    def put(self, key: tuple, mark: int | None, body: bytes, headers: dict) -> None:
        with self.lock:
            if mark is None or not self.listening or mark != self.generation:
                return  # the data changed (or may have) while the answer was made
            if len(self.entries) >= MAX_ENTRIES:
                self.entries.clear()
            self.entries[key] = (time.monotonic(), body, headers)

    def invalidate(self) -> None:
        with self.lock:
            self.generation += 1
            self.entries.clear()

    # ------------------------------------------------------------ listening
    def _ensure_listener(self) -> None:
        """One listener thread per process (gunicorn forks its workers after the app is made)."""
        if self.pid == os.getpid():
            return
        with self.lock:
            if self.pid == os.getpid():
                return
            self.pid, self.listening, self.entries = os.getpid(), False, {}
            threading.Thread(target=self._listen, name="status-cache-listener", daemon=True).start()

    def _connect(self):
        import psycopg
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
        found = conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = %s", (TRIGGER,)).fetchone()[0]
        if found < self.tables:
            conn.close()
            raise MissingTriggers(f"{found} of {self.tables} {TRIGGER} triggers: migration 0005 is not applied")
        conn.add_notify_handler(lambda _notify: self.invalidate())  # however the notification is read
        conn.execute(f"LISTEN {CHANNEL}")
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
                    conn.execute("SELECT 1")  # reads what came (the handler empties the cache); raises if dead
                    with self.lock:
                        if time.monotonic() - self.used > IDLE_S:  # nobody polls: give the connection back
                            self.listening, self.pid, self.entries = False, None, {}
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
            # This process's own writes empty its cache at once, without waiting for their notification (a client
            # that regrades and then polls the same web process sees the regrade); read-only requests do not.
            from sqlalchemy import event
            for maker in {db.Session, db.ReadSession}:
                event.listen(maker, "after_commit", lambda s, c=cache: s.info.get("reads") or c.invalidate())
        app.extensions["grader.status_cache"] = cache
    return cache


def _tables() -> tuple:
    import importlib
    return importlib.import_module(".migrations.versions.0005_status_notify", __package__).TABLES
