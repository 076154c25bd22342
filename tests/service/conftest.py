"""Fixtures for the grading service: the app on SQLite or on the session's PostgreSQL database (`pg_url`,
tests/support/fixtures.py)."""
import pytest

from .svc_helpers import Course, empty_tables, make_app, make_course


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.service)])
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
