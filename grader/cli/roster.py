"""`grader roster add | import`: the student roster, in this host's database or through a service's API.

`add` writes this host's database, as the admin commands in service.py do. `import` says where it writes: through
the API when a server or token is given (option, GRADER_SERVER/GRADER_TOKEN or the client's config file), otherwise
straight into this host's database. Either way the CSV is checked first (grader.client.batch.read_roster), and the
options, error handling and exit codes are the client's (client.py).
"""
from pathlib import Path

import click

from ..client import batch
from .client import EXIT_CODES, client_options, make_client, settings_for
from .local import or_fail


@click.group()
def roster():
    """The student roster."""


@roster.command("add")
@click.argument("username")
@click.option("--name", default="")
@click.option("--email", default="")
def roster_add(username, name, email):
    """Add one student."""
    from ..app import accounts
    or_fail(lambda s: accounts.add_student(s, username, name, email))
    click.echo(f"added {username}")


@roster.command("import", epilog=EXIT_CODES)
@click.argument("path", type=click.Path(path_type=Path))
@client_options
def roster_import(path, server, token):
    """Add the students of a CSV file with columns username[,name,email]; those already there are kept.

    Through the API when a server or token is given (option, GRADER_SERVER/GRADER_TOKEN or the config
    file); otherwise straight into this host's database, as the other service commands do.

    \b
    Examples:
      grader roster import roster.csv --server https://grader.example.edu
      GRADER_SERVER=http://127.0.0.1:5000 GRADER_TOKEN=gr_... grader roster import roster.csv
    """
    rows = batch.read_roster(path)
    settings = settings_for(server, token)
    if settings.given("server") or settings.given("token"):
        added, existing = batch.import_roster(make_client(server, token), rows)
        click.echo(f"added {len(added)} student(s); {len(existing)} already on the roster")
    else:
        click.echo(f"added {import_local(rows)} student(s)")


def import_local(rows) -> int:
    """Add the roster rows' students that this host's database does not have yet; returns how many were added."""
    from ..app import accounts
    return or_fail(lambda s: sum(row["new"] for row in accounts.import_roster(s, rows, tokens=False)))
