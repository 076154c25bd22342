"""Engine and sessions for the app and the worker, and schema migrations (Alembic)."""
import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from flask import current_app, g, has_request_context, request
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import sessionmaker

MIGRATIONS = Path(__file__).parent / "migrations"
PG_MIGRATION_LOCK = 0x67726164  # any constant: one pg_advisory_lock key for every process migrating
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")  # requests that only read


def normalise_url(url: str) -> str:
    """postgresql:// and postgres:// mean psycopg 3, the driver we install."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


class Database:
    """One engine and session factory per process (re-created after a fork by `dispose`)."""

    def __init__(self, url: str):
        self.url = normalise_url(url)
        self.is_sqlite = make_url(self.url).get_backend_name() == "sqlite"
        if self.is_sqlite:
            self.engine = create_engine(self.url, connect_args={"timeout": 30})
            event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            self.engine = create_engine(self.url, pool_pre_ping=True, pool_size=5, max_overflow=5)
        self.Session = sessionmaker(self.engine, expire_on_commit=False)
        # Requests that only read need no transaction: in autocommit a status poll is its queries alone, without
        # the BEGIN and COMMIT round trips (two of its five on PostgreSQL). SQLite has no round trips to save.
        self.ReadSession = self.Session if self.is_sqlite else sessionmaker(
            self.engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False)

    @contextmanager
    def session(self):
        """A session committed on success and rolled back on error."""
        s = self.Session()
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    def after_fork(self):
        """Drop pooled connections inherited from the parent process (never share a socket across a fork)."""
        self.engine.dispose(close=False)


def _sqlite_pragmas(dbapi_conn, _record):
    """WAL lets the web process read while a worker writes; foreign keys are off by default in SQLite."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def default_sqlite_url(instance_path: str) -> str:
    """SQLite file in the instance folder."""
    return "sqlite:///" + os.path.join(instance_path, "grader.sqlite")


def init_app(app) -> Database:
    """Attach the database to the app; sessions opened during a request close when it ends."""
    db = Database(app.config["DATABASE_URL"])
    app.extensions["grader.db"] = db
    app.teardown_appcontext(_close_session)
    return db


def get_db(app=None) -> Database:
    """The app's Database."""
    return (app or current_app).extensions["grader.db"]


def session():
    """The session of the current app context (request or task)."""
    if "db_session" not in g:
        reads = has_request_context() and request.method in SAFE_METHODS
        db = get_db()
        g.db_session = (db.ReadSession if reads else db.Session)(info={"reads": reads})
    return g.db_session


def _close_session(exc):
    s = g.pop("db_session", None)
    if s is not None:
        if exc is not None:
            s.rollback()
        elif s.info["reads"]:
            # A read ends the same with COMMIT as with ROLLBACK (on PostgreSQL it had no transaction at all), but
            # psycopg forgets its prepared statements at every ROLLBACK it sends: the status polls' queries would
            # be parsed and planned again on every request.
            try:
                s.commit()
            except SQLAlchemyError:
                pass  # the answer is made and nothing was written: close() below rolls back what is left
        s.close()


def alembic_config(connection=None):
    """An Alembic Config that needs no alembic.ini: the scripts live in the package."""
    from alembic.config import Config
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


@contextmanager
def _migration_lock(db: Database, connection):
    """Only one process migrates at a time (web and workers may start together)."""
    if db.is_sqlite:
        path = make_url(db.url).database
        if not path or path == ":memory:":
            yield
            return
        with open(path + ".migrate-lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield
    else:
        connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": PG_MIGRATION_LOCK})
        connection.commit()
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_MIGRATION_LOCK})
            connection.commit()


def upgrade(db: Database, revision: str = "head") -> None:
    """Apply migrations up to `revision`."""
    from alembic import command
    with db.engine.connect() as connection, _migration_lock(db, connection):
        command.upgrade(alembic_config(connection), revision)
        connection.commit()


def downgrade(db: Database, revision: str) -> None:
    """Revert migrations down to `revision`."""
    from alembic import command
    with db.engine.connect() as connection, _migration_lock(db, connection):
        command.downgrade(alembic_config(connection), revision)
        connection.commit()


def current_revision(db: Database) -> str | None:
    """The revision the database is at (None before the first migration)."""
    from alembic.migration import MigrationContext
    with db.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
