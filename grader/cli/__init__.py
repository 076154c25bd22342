"""The `grader` command: every subcommand is added to the group here, in one place.

`check` grades a file locally (check.py); the client commands talk to a service through its API (client.py);
`roster` works on this host's database or through the API (roster.py); the admin commands run the service on this
host (service.py, instructor.py, sharing local.py). The modules define plain click commands and never import this
group. Importing the CLI loads neither torch nor flask, sqlalchemy or celery: the commands import them in their
bodies, so `grader --help` and the client start quickly.
"""
import os
import sys

import click

from . import check, client, feedback, instructor, roster, service


@click.group(epilog=("The service's client: submit, status, results, regrade, rescore, export, roster import; "
                     "server and token from --server/--token, GRADER_SERVER/GRADER_TOKEN or "
                     "~/.config/transformer-grader/config.toml.\n\n" + client.EXIT_CODES))
@click.version_option(package_name="transformer-grader")
def main():
    """Grade 'build and defend your own transformer' submissions."""


# grade locally
main.add_command(check.check)
# the service's client (server and token from options, GRADER_* variables or the config file)
main.add_command(client.submit)
main.add_command(client.status)
main.add_command(client.results)
main.add_command(client.regrade)
main.add_command(client.rescore)
main.add_command(client.export)
main.add_command(client.config_group)
# the roster: `import` through the API when a server or token is given, else into this host's database
main.add_command(roster.roster)
# run the service on this host
main.add_command(service.serve)
main.add_command(service.worker)
main.add_command(service.sweep)
main.add_command(service.db)
main.add_command(service.token)
main.add_command(service.assignment)
service.assignment.add_command(feedback.assignment_feedback)
main.add_command(instructor.instructor)


def entry():
    """The console script and `python -m grader`: main(); once `grader check` has printed its result, out without
    the interpreter's teardown, which with torch loaded takes 0.3-0.5 s here (issue 19, target 2)."""
    try:
        main()
    except SystemExit as exc:
        if check.FINISHED and (exc.code is None or isinstance(exc.code, int)):
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except OSError:
                raise exc from None  # a closed pipe: the usual exit reports it
            from grader.sandbox.base import settle  # imported already by the check
            settle()  # a sandbox closed in the background (its job done) is killed, swept and removed first
            os._exit(exc.code or 0)  # every sandbox is closed and every job directory removed by now
        raise
