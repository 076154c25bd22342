"""Fixtures for the grading service: the app on SQLite or on a PostgreSQL database made for this session."""
import secrets

import pytest

from .svc_helpers import PG_ADMIN, Course, empty_tables, make_app, make_course, unavailable


@pytest.fixture(scope="session")
def pg_url():
    """A PostgreSQL database of our own for the whole test session, dropped at the end."""
    import psycopg
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL is not reachable at {PG_ADMIN}: {exc}")
    name = f"grader_test_{secrets.token_hex(4)}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def app(request, tmp_path, monkeypatch):
    """The app on each store: SQLite in a temporary folder, and the session's PostgreSQL database emptied."""
    from grader.app.db import get_db
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    if request.param == "sqlite":
        application = make_app(f"sqlite:///{tmp_path}/grader.sqlite", tmp_path)
    else:
        application = make_app(request.getfixturevalue("pg_url"), tmp_path)
        empty_tables(application)
    yield application
    get_db(application).engine.dispose()


@pytest.fixture
def sqlite_app(tmp_path, monkeypatch):
    """The app on SQLite only (API behaviour that does not depend on the store)."""
    from grader.app.db import get_db
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    application = make_app(f"sqlite:///{tmp_path}/grader.sqlite", tmp_path)
    yield application
    get_db(application).engine.dispose()


@pytest.fixture
def course(app) -> Course:
    return make_course(app)
