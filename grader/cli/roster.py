"""`grader roster add | import | list | deactivate | reactivate | remove | rotate-token`: the student roster, in this
host's database or through a service's API.

`add` writes this host's database, as the admin commands in service.py do. The others say where they work: through
the API when a server or token is given (option, GRADER_SERVER/GRADER_TOKEN or the client's config file), otherwise
straight on this host's database. Either way a roster CSV is checked first (grader.client.batch.read_roster: every bad
row named, nothing imported), and the options, error handling and exit codes are the client's (client.py).
"""
import json
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


def through_api(server, token) -> bool:
    """A server or a token given (option, environment or config file): work through the API, else locally."""
    settings = settings_for(server, token)
    return settings.given("server") or settings.given("token")


def student_row(st) -> dict:
    """A student as the API's GET /students answers (grader.app.api.roster.student_json)."""
    from ..app import accounts

    def iso(dt):
        return dt.isoformat(timespec="seconds") + "Z" if dt else None
    return {"username": st.username, "name": st.name, "email": st.email, "state": accounts.student_state(st),
            "created_at": iso(st.created_at), "deactivated_at": iso(st.deactivated_at), "removed_at": iso(st.removed_at)}


@roster.command("list", epilog=EXIT_CODES)
@click.option("--removed", is_flag=True, help="Removed students too.")
@click.option("--json", "as_json", is_flag=True, help="The students as JSON.")
@client_options
def roster_list(removed, as_json, server, token):
    """The roster: each student's id, state (active, deactivated, removed), name and e-mail."""
    if through_api(server, token):
        rows = make_client(server, token).students(removed=removed)
    else:
        from ..app import accounts
        rows = or_fail(lambda s: [student_row(st) for st in accounts.list_students(s, removed=removed)])
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    if not rows:
        click.echo("nobody on the roster")
        return
    width = max(len(r["username"]) for r in rows)
    for r in rows:
        click.echo(f"{r['username']:<{width}}  {r.get('state', 'active'):<11}  {r['name']}"
                   + (f" <{r['email']}>" if r["email"] else ""))


# What each state command prints when it is done, and its help.
ACTIONS = {
    "deactivate": "{u} is deactivated: no sign-in or upload; still on the roster and the gradebook",
    "reactivate": "{u} is active",
    "remove": "{u} is removed from the roster and the gradebook; {n} token(s) revoked; their submissions are kept",
}
HELP = {"deactivate": "Stop USERNAME signing in and uploading; they stay on the roster and the gradebook.",
        "reactivate": "Undo a deactivation or a removal of USERNAME (a removed student needs a new token).",
        "remove": "Take USERNAME off the roster and the gradebook and revoke their tokens; their submissions are kept."}


def state_command(action: str):
    """`grader roster ACTION USERNAME` through the API or on this host's database."""
    @roster.command(action, epilog=EXIT_CODES, help=HELP[action])
    @click.argument("username")
    @client_options
    def command(username, server, token):
        if through_api(server, token):
            row = make_client(server, token).student_action(username, action)
        else:
            row = or_fail(lambda s: local_action(s, action, username))
        click.echo(ACTIONS[action].format(u=username, n=row.get("tokens_revoked", 0)))
        if action == "reactivate" and row.get("was") == "removed":
            click.echo(f"their earlier tokens stay revoked: `grader roster rotate-token {username}` gives a new one")
    return command


def local_action(s, action: str, username: str) -> dict:
    from ..app import accounts
    if action == "deactivate":
        return student_row(accounts.deactivate_student(s, username))
    if action == "reactivate":
        was = accounts.student_state(accounts.get_student(s, username))
        return {**student_row(accounts.reactivate_student(s, username)), "was": was}
    student, revoked = accounts.remove_student(s, username)
    return {**student_row(student), "tokens_revoked": revoked}


for _action in ACTIONS:
    state_command(_action)


@roster.command("rotate-token", epilog=EXIT_CODES)
@click.argument("username")
@client_options
def roster_rotate(username, server, token):
    """Revoke USERNAME's tokens and issue a new one: printed once on stdout (the note on stderr).

    \b
    Examples:
      grader roster rotate-token alice > alice.token
      grader roster rotate-token alice --server https://grader.example.edu
    """
    if through_api(server, token):
        row = make_client(server, token).student_action(username, "rotate-token")
    else:
        row = or_fail(lambda s: rotated(s, username))
    click.echo(f"new token for {username} (shown only now; {row['tokens_revoked']} earlier token(s) revoked):",
               err=True)
    click.echo(row["token"])


def rotated(s, username: str) -> dict:
    """rotate-token on this host's database, answered as the API does."""
    from ..app import accounts
    row, plain, revoked = accounts.rotate_token(s, username, label="rotated by grader roster rotate-token")
    return {"id": row.id, "token": plain, "student": username, "tokens_revoked": revoked}
