"""Fixtures for the `grader` client: a light API server (SQLite, no worker) and a real grading cluster.

Reuses the service tests' helpers (tests/service/svc_cluster.py, svc_helpers.py) and the shared `pg_url` fixture
(tests/support/fixtures.py).
"""
import logging
import os

import pytest

from tests.service.svc_cluster import LiveServer, Worker, cluster_app
from tests.service.svc_helpers import make_app, make_course

from .cli_helpers import CLUSTER_SETTINGS, Server

logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request drowns a failure's output


@pytest.fixture(autouse=True)
def no_user_config(tmp_path, monkeypatch):
    """No test reads the user's own config file or GRADER_SERVER/GRADER_TOKEN."""
    monkeypatch.setenv("GRADER_CONFIG", str(tmp_path / "no-config.toml"))
    for name in ("GRADER_SERVER", "GRADER_TOKEN", "GRADER_RETRIES", "GRADER_TIMEOUT", "GRADER_ASSIGNMENT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def api_server(tmp_path_factory):
    """The API on SQLite over real HTTP, jobs to an in-memory broker (nothing grades): for the error paths."""
    from grader.app.db import get_db
    tmp = tmp_path_factory.mktemp("api")
    previous = os.environ.get("GRADER_INSTANCE_PATH")
    os.environ["GRADER_INSTANCE_PATH"] = str(tmp / "instance")
    try:
        app = make_app(f"sqlite:///{tmp}/grader.sqlite", tmp, ENFORCE_ATTEMPTS=False)
    finally:
        os.environ.pop("GRADER_INSTANCE_PATH") if previous is None else os.environ.update(GRADER_INSTANCE_PATH=previous)
    course = make_course(app, "cap", ["split_heads"])
    live = LiveServer(app).start()
    yield Server(live.url, app, course, tmp)
    live.stop()
    get_db(app).engine.dispose()


@pytest.fixture(scope="module")
def cluster(pg_url, tmp_path_factory):
    """The app on PostgreSQL over HTTP, a Redis of our own and one `grader worker` with 2 grading processes."""
    from grader.app.db import get_db
    workdir = tmp_path_factory.mktemp("cli-cluster")
    app, redis, env = cluster_app(pg_url, workdir, CLUSTER_SETTINGS, secret_key="test")
    course = make_course(app, "batch", ["split_heads"])
    live = LiveServer(app).start()
    worker = Worker("cli", env, workdir, concurrency=2, beat=True)
    try:
        worker.start()
        yield Server(live.url, app, course, workdir, worker)
    finally:
        worker.kill()
        live.stop()
        redis.stop()
        get_db(app).engine.dispose()
