"""Schema migrations: they build exactly the models' schema, on SQLite and PostgreSQL, and go down and up again."""
import secrets

import pytest
from sqlalchemy import inspect

from grader.app import db as database
from grader.app.models import Base
from .svc_helpers import PG_ADMIN, unavailable


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db(request, tmp_path):
    """A database with no schema at all."""
    if request.param == "sqlite":
        db = database.Database(f"sqlite:///{tmp_path}/m.sqlite")
        yield db
        db.engine.dispose()
        return
    import psycopg
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL is not reachable: {exc}")
    name = f"grader_migrate_{secrets.token_hex(4)}"
    admin.execute(f'CREATE DATABASE "{name}"')
    db = database.Database(PG_ADMIN.rsplit("/", 1)[0] + "/" + name)
    yield db
    db.engine.dispose()
    admin.execute(f'DROP DATABASE "{name}"')
    admin.close()


def test_migrations_build_the_models_schema_and_revert(empty_db):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    database.upgrade(empty_db)
    assert database.current_revision(empty_db) is not None
    with empty_db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == [], f"the models and the migrations disagree; add a migration: {diff}"
    database.downgrade(empty_db, "base")
    assert set(inspect(empty_db.engine).get_table_names()) <= {"alembic_version"}
    database.upgrade(empty_db)
    assert set(Base.metadata.tables) <= set(inspect(empty_db.engine).get_table_names())


def test_the_cli_upgrades_the_database(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from grader.cli import main
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path))
    monkeypatch.setenv("GRADER_DATABASE_URL", f"sqlite:///{tmp_path}/cli.sqlite")
    monkeypatch.setenv("GRADER_AUTO_MIGRATE", "false")
    runner = CliRunner()
    r = runner.invoke(main, ["db", "upgrade"])
    assert r.exit_code == 0 and "database at revision" in r.output, r.output
    assert runner.invoke(main, ["db", "current"]).output.strip() != "(none)"
    assert runner.invoke(main, ["roster", "add", "dana"]).exit_code == 0
    r = runner.invoke(main, ["token", "create", "--student", "dana"])
    assert r.exit_code == 0 and r.output.startswith("gr_"), r.output
    assert runner.invoke(main, ["token", "create", "--student", "nobody"]).exit_code != 0
    r = runner.invoke(main, ["assignment", "create", "cap", "--checks", "split_heads"])
    assert r.exit_code == 0, r.output
