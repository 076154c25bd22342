"""What the admin commands share: this host's app (instance file and GRADER_* variables) and a session on its database.

flask and sqlalchemy are imported inside the functions, so that importing the CLI (`grader check`, the client)
never loads them.
"""
import os

import click


def make_app(migrate: bool = True):
    """The app from the instance file and GRADER_* variables; db commands migrate only when asked."""
    if not migrate:
        os.environ.setdefault("GRADER_AUTO_MIGRATE", "false")
    from ..app import create_app
    from ..app.instance import InsecureInstance
    try:
        return create_app()  # sets the umask: what this command writes in the instance is 0600
    except InsecureInstance as exc:
        raise click.ClickException(str(exc)) from None


def in_session(fn):
    """Run fn(session) in a committed session of a fresh app."""
    from ..app.db import get_db
    app = make_app()
    with app.app_context(), get_db(app).session() as s:
        return fn(s)


def or_fail(fn):
    """in_session(fn), with the store's refusals as click errors."""
    from ..app.store import StoreError
    try:
        return in_session(fn)
    except StoreError as exc:
        raise click.ClickException(exc.message) from None
