"""Fixtures for the pages: the app on SQLite with an in-memory broker, a course, an instructor account."""
import logging

import pytest

from tests.service.svc_helpers import make_app, make_course

from .web_helpers import PASSWORD, sign_in_instructor, sign_in_student

logging.getLogger("werkzeug").setLevel(logging.WARNING)


@pytest.fixture
def web_app(tmp_path, monkeypatch):
    """The whole app (API and pages) on SQLite in a temporary folder; uploads are queued, never graded here."""
    from grader.app.db import get_db
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    app = make_app(f"sqlite:///{tmp_path}/grader.sqlite", tmp_path, ENFORCE_ATTEMPTS=False)
    yield app
    get_db(app).engine.dispose()


@pytest.fixture
def course(web_app):
    """Assignment 'cap', students alice and bob with tokens, and the instructor account prof."""
    from grader.app import accounts
    from grader.app.db import get_db
    c = make_course(web_app)
    with web_app.app_context(), get_db(web_app).session() as s:
        accounts.create_instructor(s, "prof", PASSWORD, "Prof. Ada")
    return c


@pytest.fixture
def client(web_app):
    return web_app.test_client()


@pytest.fixture
def prof(web_app, course):
    """A test client signed in as the instructor prof."""
    client = web_app.test_client()
    sign_in_instructor(client)
    return client


@pytest.fixture
def students(web_app, course):
    """A test client for each of alice and bob, signed in."""
    clients = {name: web_app.test_client() for name in ("alice", "bob")}
    for name, client in clients.items():
        sign_in_student(client, name, getattr(course, name))
    return clients
