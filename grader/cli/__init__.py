"""The `grader` command: `check` grades locally; the client commands talk to a service; the admin commands run one."""
import click


@click.group()
@click.version_option(package_name="transformer-grader")
def main():
    """Grade 'build and defend your own transformer' submissions."""


from . import check, service, client, instructor  # noqa: E402,F401  (each registers its commands on main)
