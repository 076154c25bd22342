"""`grader instructor create | password | list`: accounts for the instructor pages (passwords stored hashed).

Added to the `grader` group in grader/cli/__init__.py; as in service.py, flask and sqlalchemy are imported inside
the commands.
"""
import click

from .local import in_session, or_fail


@click.group()
def instructor():
    """Instructor accounts for the web pages (students sign in with their roster id and token instead)."""


@instructor.command("create")
@click.argument("username")
@click.option("--name", default="", help="Shown on the pages.")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="Asked for when not given (at least 10 characters); stored only as a salted hash.")
def instructor_create(username, name, password):
    """Create an instructor account."""
    from ..app import accounts
    or_fail(lambda s: accounts.create_instructor(s, username, password, name))
    click.echo(f"created instructor {username}")


@instructor.command("password")
@click.argument("username")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
def instructor_password(username, password):
    """Set a new password for an instructor."""
    from ..app import accounts
    or_fail(lambda s: accounts.set_instructor_password(s, username, password))
    click.echo(f"password changed for {username}")


@instructor.command("list")
def instructor_list():
    """List instructor accounts (never their passwords)."""
    from sqlalchemy import select

    from ..app.models import Instructor

    def rows(s):
        return [(i.id, i.username, i.name, "disabled" if i.disabled_at else "active")
                for i in s.scalars(select(Instructor).order_by(Instructor.username))]
    for row in in_session(rows):
        click.echo("\t".join(map(str, row)))
