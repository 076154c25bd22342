"""The `grader` command: a thin click layer over the judge's plain functions."""
import json
import sys

import click

from .checks import ALL_IDS
from .configs import DEFAULT_SEED
from .judge import Options, grade_file
from .sandbox import Limits

COLOURS = {"pass": "green", "fail": "red", "error": "red", "timeout": "yellow", "oom": "yellow", "crash": "magenta",
           "skipped": "blue"}


def parse_ids(value: str | None) -> tuple:
    """'a,b' -> ('a', 'b'); unknown ids are a usage error."""
    ids = tuple(v.strip() for v in (value or "").split(",") if v.strip())
    unknown = [i for i in ids if i not in ALL_IDS]
    if unknown:
        raise click.BadParameter(f"unknown check id {', '.join(unknown)}; known: {', '.join(ALL_IDS)}")
    return ids


@click.group()
@click.version_option(package_name="transformer-grader")
def main():
    """Grade 'build and defend your own transformer' submissions."""


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of a table.")
@click.option("--only", help="Comma-separated check ids to run (default: all).")
@click.option("--skip", help="Comma-separated check ids to leave out.")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed for the judge's inputs.")
@click.option("--timeout", type=float, default=Limits.stage_s, show_default=True, help="Seconds per check.")
def check(path, as_json, only, skip, seed, timeout):
    """Grade the module at PATH locally, in a sandbox, and show each check's verdict.

    \b
    Examples:
      grader check submissions/reference_lm.py
      grader check my_transformer.py --only attention_sdpa,rope
      grader check my_transformer.py --json > result.json

    Exit status is 0 whenever grading completed, whatever the result; 2 for bad usage.
    """
    options = Options(seed=seed, only=parse_ids(only), skip=parse_ids(skip), limits=Limits(stage_s=timeout))
    report = grade_file(path, options)
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        print_table(report)


def print_table(report: dict) -> None:
    """A readable table: one row per check, then its message and details."""
    sub = report["submission"]
    click.echo(f"{sub['name']}  track={sub.get('track') or '?'}  sha256={str(sub.get('sha256', ''))[:12]}")
    width = max(len(c["id"]) for c in report["checks"]) if report["checks"] else 10
    for c in report["checks"]:
        status = click.style(f"{c['status']:<8}", fg=COLOURS[c["status"]], bold=True)
        click.echo(f"  {c['id']:<{width}}  {status} {c['duration_s']:6.2f}s  {c['message']}")
        for line in c["details"][1:] if c["status"] == "fail" else c["details"]:
            click.echo(f"  {'':<{width}}           {'':>6}   - {line}")
    summary = ", ".join(f"{n} {s}" for s, n in report["summary"].items())
    t = report.get("timings", {})
    click.echo(f"{summary}  (total {t.get('total_s', 0):.1f}s, torch import {t.get('torch_import_s') or 0:.1f}s)")


if __name__ == "__main__":
    sys.exit(main())
