"""`grader serve | worker | sweep | db | token`: the commands that run the service on this host.

Added to the `grader` group in grader/cli/__init__.py (`roster` is in roster.py, `instructor` in instructor.py,
`assignment` in assignment.py, re-exported here as service.assignment).
flask, celery and sqlalchemy are imported inside the commands so that `grader check` and the client stay quick.
"""
import json
import os

import click

from .assignment import assignment  # noqa: F401  (the `assignment` group lives in assignment.py)
from .local import in_session, make_app, or_fail


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--workers", "-w", type=click.IntRange(min=1), default=None,
              help="gunicorn worker processes  [default: one per CPU, at least 2]")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads per worker process for reads, and writes running at once (WEB_TURNS)  [default: 4]")
@click.option("--dev", is_flag=True, help="Flask's development server (one process) instead of gunicorn.")
@click.option("--debug", is_flag=True, help="Flask's debugger and reloader; implies --dev (never in production).")
@click.option("--access-log", is_flag=True, help="Log every request on standard output (gunicorn's access log).")
def serve(host, port, workers, threads, dev, debug, access_log):
    """Run the web app and JSON API under gunicorn (Flask's development server with --dev)."""
    app = make_app()
    if dev or debug:
        app.run(host=host, port=port, debug=debug, threaded=True)
        return
    from ..app.serving import serve as run
    run(app, host, port, workers, threads, access_log)


@click.command()
@click.option("--concurrency", "-c", default=1, show_default=True, type=int, help="Grading processes.")
@click.option("--beat/--no-beat", default=False, help="Also run the sweeper's schedule (one worker per cluster).")
@click.option("--loglevel", "-l", default="info", show_default=True)
@click.option("--hostname", "-n", default=None, help="Celery node name (default celery@<host>).")
def worker(concurrency, beat, loglevel, hostname):
    """Run a Celery grading worker bound to the app's settings."""
    from ..app.config import sweep_queue
    app = make_app()
    queues = f"{app.config['QUEUE']},{sweep_queue(app.config)}"
    argv = ["worker", f"--loglevel={loglevel}", f"--concurrency={concurrency}", "-Q", queues,
            "--without-gossip", "--without-mingle"]
    if hostname:
        argv += ["-n", hostname]
    if beat:
        argv += ["-B", "-s", os.path.join(app.instance_path, "celerybeat-schedule")]
    app.extensions["celery"].worker_main(argv)


@click.command()
def sweep():
    """One sweeper pass now: queue again what the broker lost (the beat schedule does this periodically)."""
    from worker.sweeper import sweep as run
    app = make_app()
    with app.app_context():
        click.echo(json.dumps(run(app)))


@click.group()
def db():
    """Database schema migrations (Alembic). The app also migrates on startup unless GRADER_AUTO_MIGRATE=false."""


@db.command()
@click.argument("revision", default="head")
def upgrade(revision):
    """Apply migrations up to REVISION (default: head)."""
    from ..app.db import current_revision, get_db, upgrade as up
    app = make_app(migrate=False)
    up(get_db(app), revision)
    click.echo(f"database at revision {current_revision(get_db(app))}")


@db.command()
@click.argument("revision")
def downgrade(revision):
    """Revert migrations down to REVISION ('base' empties the schema)."""
    from ..app.db import current_revision, downgrade as down, get_db
    app = make_app(migrate=False)
    down(get_db(app), revision)
    click.echo(f"database at revision {current_revision(get_db(app))}")


@db.command()
def current():
    """Print the database's revision."""
    from ..app.db import current_revision, get_db
    click.echo(current_revision(get_db(make_app(migrate=False))) or "(none)")


@click.group()
def token():
    """API tokens (stored hashed: a token is shown once, when created)."""


@token.command("create")
@click.option("--instructor", "role", flag_value="instructor", help="A token that may do everything.")
@click.option("--student", "username", help="A token for this student only.")
@click.option("--label", default="", help="A note saying whose or what for.")
def token_create(role, username, label):
    """Create a token and print it."""
    from ..app.accounts import get_student, issue_token
    if bool(role) == bool(username):
        raise click.UsageError("give exactly one of --instructor or --student USERNAME")

    def create(s):
        student = get_student(s, username) if username else None
        return issue_token(s, "student" if username else "instructor", student, label)[1]
    click.echo(or_fail(create))


@token.command("list")
def token_list():
    """List tokens (ids, roles, students; never the secrets)."""
    from ..app.accounts import list_tokens

    def rows(s):
        return [(t.id, t.role, t.student.username if t.student else "-", t.label,
                 "revoked" if t.revoked_at else "active") for t in list_tokens(s)]
    for row in in_session(rows):
        click.echo("\t".join(map(str, row)))


@token.command("revoke")
@click.argument("token_id", type=int)
def token_revoke(token_id):
    """Revoke the token with id TOKEN_ID."""
    from ..app.accounts import revoke_token
    if not in_session(lambda s: revoke_token(s, token_id)):
        raise click.ClickException(f"no active token {token_id}")
    click.echo(f"revoked token {token_id}")
