"""Fixtures every test folder may use, registered once by the root conftest (`pytest_plugins`)."""
import secrets

import pytest

from tests.support.grading import REFERENCES


@pytest.fixture(scope="session")
def reference_text():
    """The reference source for a track."""
    return lambda track: REFERENCES[track].read_text()


@pytest.fixture
def local_cli(tmp_path, monkeypatch):
    """Run `grader ARGS` in this process against a fresh SQLite instance in tmp_path; returns (exit code, output)."""
    from click.testing import CliRunner

    from grader.cli import main
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    monkeypatch.setenv("GRADER_DATABASE_URL", f"sqlite:///{tmp_path}/cli.sqlite")
    monkeypatch.setenv("GRADER_SECRET_KEY", "a-test-key-of-some-length")
    runner = CliRunner()

    def run(*args):
        r = runner.invoke(main, [str(a) for a in args])
        return r.exit_code, r.output
    return run


@pytest.fixture(scope="session")
def pg_url():
    """A PostgreSQL database of our own for the whole test session, dropped at the end (marks the test `service`)."""
    import psycopg

    from tests.service.svc_helpers import PG_ADMIN, unavailable
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
