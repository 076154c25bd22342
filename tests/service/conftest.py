"""Fixtures for the grading service: the app on SQLite or on the session's PostgreSQL database (`pg_url`,
tests/support/fixtures.py)."""
import os

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


@pytest.fixture
def svc(sqlite_app, monkeypatch):
    """The app with a course, grading on the process backend as a worker does (root: its full set of layers)."""
    from grader.sandbox.isolation import ALLOW_WEAK_ENV
    from tests.sandbox.support import layer_missing
    if os.geteuid() != 0:
        layer_missing("the process backend's full set of layers (uid pool, cgroup) needs root")
    monkeypatch.delenv(ALLOW_WEAK_ENV, raising=False)
    sqlite_app.config["SANDBOX_BACKEND"] = "process"
    return sqlite_app, make_course(sqlite_app)
