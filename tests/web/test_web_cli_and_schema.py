"""`grader instructor create`, and the web tables' migration on SQLite and PostgreSQL."""
import secrets

import pytest
from click.testing import CliRunner
from sqlalchemy import inspect, select

from tests.service.svc_helpers import PG_ADMIN, unavailable

WEB_TABLES = {"instructors", "reports", "manual_grades", "releases", "rate_events"}


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path))
    monkeypatch.setenv("GRADER_DATABASE_URL", f"sqlite:///{tmp_path}/cli.sqlite")
    return tmp_path


def test_instructor_create_stores_a_hash_and_signs_in(cli_env):
    from grader.app import accounts
    from grader.app.models import Instructor
    from grader.cli import main
    from grader.cli.local import in_session
    runner = CliRunner()
    r = runner.invoke(main, ["instructor", "create", "ada", "--name", "Ada"], input="long enough pw\nlong enough pw\n")
    assert r.exit_code == 0 and "created instructor ada" in r.output, r.output
    assert runner.invoke(main, ["instructor", "create", "ada", "--password", "another long one"]).exit_code != 0
    short = runner.invoke(main, ["instructor", "create", "bo", "--password", "short"])
    assert short.exit_code != 0 and "at least 10 characters" in short.output
    assert in_session(lambda s: accounts.authenticate_instructor(s, "ada", "long enough pw") is not None)
    assert runner.invoke(main, ["instructor", "password", "ada", "--password", "a new password"]).exit_code == 0
    assert in_session(lambda s: accounts.authenticate_instructor(s, "ada", "a new password") is not None)
    stored = in_session(lambda s: s.scalar(select(Instructor.password_hash).where(Instructor.username == "ada")))
    assert stored.startswith("scrypt:") and "a new password" not in stored, "a salted hash, never the password"
    listed = runner.invoke(main, ["instructor", "list"])
    assert "ada\tAda\tactive" in listed.output, listed.output
    assert "a new password" not in listed.output and stored.split("$")[-1] not in listed.output, \
        "the list shows neither the password nor its hash"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_web_migration_goes_up_and_down(tmp_path, backend):
    from grader.app import db as database
    if backend == "sqlite":
        db, drop = database.Database(f"sqlite:///{tmp_path}/m.sqlite"), None
    else:
        import psycopg
        try:
            admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
        except psycopg.OperationalError as exc:
            unavailable(f"PostgreSQL is not reachable: {exc}")
        name = f"grader_webmig_{secrets.token_hex(4)}"
        admin.execute(f'CREATE DATABASE "{name}"')
        db = database.Database(PG_ADMIN.rsplit("/", 1)[0] + "/" + name)

        def drop():
            admin.execute(f'DROP DATABASE "{name}"')
            admin.close()
    try:
        database.upgrade(db)
        assert WEB_TABLES <= set(inspect(db.engine).get_table_names())
        database.downgrade(db, "0001")
        db.engine.dispose()
        assert not WEB_TABLES & set(inspect(db.engine).get_table_names()), "downgrade drops the web tables"
        assert "submissions" in inspect(db.engine).get_table_names(), "and only them"
        database.upgrade(db)
        assert WEB_TABLES <= set(inspect(db.engine).get_table_names())
    finally:
        db.engine.dispose()
        if drop:
            drop()
