"""`grader submit | status | results | regrade | rescore | export | config`: the service's client.

A thin click layer over grader.client.http (the HTTP calls), grader.client.batch (files, students, resume, follow)
and grader.client.settings (server and token). Added to the `grader` group in grader/cli/__init__.py; `roster import`
(roster.py) shares the options, error handling and exit codes defined here. Imports only requests, never flask or torch.
"""
import functools
import json
import os
import sys
import traceback
from pathlib import Path

import click

from ..client import batch, settings as client_settings
from ..client.batch import BatchError
from ..client.http import EXIT_FAILED, EXIT_USAGE, AuthFailed, Client, ClientError
from ..client.settings import ConfigError

EXIT_CODES = """\b
Exit codes (the same for every command that talks to the server):
  0  success
  1  the operation failed (an upload refused, a grading failed, not found)
  2  usage error (a missing file, a bad manifest, a bad option or config)
  3  cannot reach the server (after retries)
  4  authentication or permission (no token, a token refused, not allowed)"""
SERVER_HELP = ("The service's URL (default: GRADER_SERVER, then the config file, then "
               f"{client_settings.DEFAULT_SERVER}).")
TOKEN_HELP = "API token (default: GRADER_TOKEN, then the config file). Prefer those: options show in `ps`."


# ---------------------------------------------------------------- plumbing

def fail(message: str, code: int):
    click.echo(f"error: {message}", err=True)
    click.get_current_context().exit(code)


def handled(fn):
    """Every error as one line on stderr and its exit code; a traceback only with GRADER_DEBUG=1."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ClientError as exc:
            fail(exc.message, exc.exit_code)
        except (BatchError, ConfigError) as exc:
            fail(str(exc), EXIT_USAGE)
        except KeyboardInterrupt:
            fail("interrupted; run the same command again to carry on", 130)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except Exception as exc:  # a bug of ours: still one line, the traceback on request
            if os.environ.get("GRADER_DEBUG"):
                traceback.print_exc()
            fail(f"unexpected {type(exc).__name__}: {exc} (GRADER_DEBUG=1 shows the traceback)", EXIT_FAILED)
    return wrapper


def client_options(fn):
    """--server and --token on a command, and the error handling every client command shares."""
    fn = click.option("--token", metavar="TOKEN", help=TOKEN_HELP)(fn)
    fn = click.option("--server", metavar="URL", help=SERVER_HELP)(fn)
    return handled(fn)


def assignment_option(required: bool):
    return click.option("--assignment", "-a", metavar="NAME", required=required, envvar="GRADER_ASSIGNMENT",
                        help="The assignment's slug (default: GRADER_ASSIGNMENT).")


def settings_for(server, token) -> client_settings.Settings:
    settings = client_settings.resolve(server=server, token=token)
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
    return settings


def make_client(server, token) -> Client:
    """A client from options > environment > config file; no token at all is an authentication error."""
    s = settings_for(server, token)
    if not s.token:
        raise AuthFailed(f"no token for {s.server}: give --token, set GRADER_TOKEN, or run "
                         f"`grader config set token TOKEN`")
    return Client(s.server, s.token, retries=s.retries, timeout=s.timeout)


def progress_on() -> bool:
    return sys.stderr.isatty()


def emit(text: str, output: str | None) -> None:
    """Text to a file (-o) or stdout."""
    if output and output != "-":
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=not text.endswith("\n"))


def describe(sub: dict) -> str:
    """'queued (3rd in line)', 'running rope (3/9)', 'done', 'failed'."""
    status = sub["status"]
    if status == "queued" and sub.get("queue_position"):
        return f"queued (position {sub['queue_position']})"
    if status == "running" and sub.get("progress"):
        p = sub["progress"]
        where = f"{p['check']} ({p['index']}/{p['of']})" if p.get("check") else p.get("phase", "")
        return f"running {where}".rstrip()
    return status


class Follower:
    """Shows grading progress: a bar on a terminal, a line per change otherwise (logs, CI)."""

    def __init__(self, total: int, quiet: bool):
        self.total, self.quiet, self.bar, self.shown, self.last = total, quiet, None, 0, None
        if not quiet and progress_on():
            self.bar = click.progressbar(length=total, label="grading  ", file=sys.stderr, show_pos=True)
            self.bar.__enter__()

    def __call__(self, subs: dict) -> None:
        c = batch.counts(subs.values())
        final = c["done"] + c["failed"]
        if self.bar is not None:
            self.bar.update(final - self.shown)
            self.shown = final
        elif not self.quiet and c != self.last:
            click.echo(f"grading: {final}/{self.total} finished ({c['done']} done, {c['failed']} failed), "
                       f"{c['running']} running, {c['queued']} queued", err=True)
        self.last = c

    def close(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def follow(client: Client, slug: str, ids, timeout, quiet: bool) -> dict:
    """Follow ids to the end; a timeout is a failure naming what is still pending."""
    follower = Follower(len(ids), quiet)
    try:
        return batch.follow(client, slug, ids, on_change=follower, timeout_s=timeout)
    except TimeoutError as exc:
        subs = exc.args[0]
        c = batch.counts(subs.values())
        raise ClientError(f"still grading after {timeout:g} s: {c['queued']} queued, {c['running']} running "
                          f"(the uploads are kept; `grader status -a {slug}` shows them later)") from None
    finally:
        follower.close()


# ---------------------------------------------------------------- submit

@click.command(epilog=EXIT_CODES)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@assignment_option(required=True)
@click.option("--manifest", "-m", type=click.Path(path_type=Path), metavar="CSV",
              help="CSV with columns file,student (files relative to the CSV); instead of --pattern.")
@click.option("--pattern", default=batch.DEFAULT_PATTERN, show_default=True, metavar="REGEX",
              help="Regular expression on the file name; its (?P<student>...) group is the student.")
@click.option("--glob", default="*.py", show_default=True, help="Files to take from a directory (recursively).")
@click.option("--jobs", "-j", default=4, show_default=True, type=click.IntRange(1, 32), help="Parallel uploads.")
@click.option("--wait", "-w", is_flag=True, help="Follow grading until every file is graded.")
@click.option("--timeout", type=float, default=None, help="With --wait: give up after this many seconds.")
@click.option("--dry-run", is_flag=True, help="Show what would be uploaded and skipped, upload nothing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout: each file's outcome.")
@click.option("--quiet", "-q", is_flag=True, help="No progress, only the summary and errors.")
@client_options
def submit(paths, assignment, manifest, pattern, glob, jobs, wait, timeout, dry_run, as_json, quiet, server, token):
    """Upload files to ASSIGNMENT: an instructor's batch, or a student's own module.

    PATHS are files or directories (searched for --glob). Each file's student comes from its name
    (--pattern) or from a --manifest CSV. Files the student already has on the server (same sha256)
    are skipped, so running the same command again after an interruption uploads only the rest.
    Connection errors and 502/503/504 are retried with backoff.

    \b
    Examples:
      grader submit lms_export/ -a capstone --wait           # alice.py, bob_v2.py -> alice, bob
      grader submit lms_export/ -a capstone --pattern '_(?P<student>[0-9]+)_'   # Canvas-style names
      grader submit -a capstone --manifest export/manifest.csv
      grader submit my_transformer.py -a capstone --wait     # a student token: my own file
    """
    # everything that can be checked without the server is checked first: usage errors never wait on the network
    if not paths and manifest is None:
        raise BatchError("name the files or directories to upload, or give --manifest")
    files = batch.collect_files(paths, glob) if paths else None
    if files is not None and not files:
        raise BatchError(f"no files matching {glob} in {', '.join(map(str, paths))}")
    listed = batch.read_manifest(manifest, files) if manifest is not None else None
    client = make_client(server, token)
    me = client.me()
    instructor = me["role"] == "instructor"
    if not instructor:
        if listed is not None or len(files) != 1:
            raise BatchError(f"a student token uploads one file, for {me['student']}; "
                             f"{'--manifest is for instructors' if listed else f'got {len(files)} files'}")
        items = [batch.Item(files[0], me["student"])]
    else:
        items = listed if listed is not None else batch.by_pattern(files, pattern)
    for item in items:
        item.load()
    client.assignment(assignment)  # an unknown assignment fails here, once, not once per file
    have = batch.uploaded_shas(client, assignment)
    todo, skipped = batch.plan(items, have)
    outcomes = [batch.Outcome(item, "skipped", {"id": have[item.student][item.sha256]},
                              "already on the server") for item in skipped]
    if dry_run:
        for item in todo:
            click.echo(f"would upload {item.path} for {item.student}")
        click.echo(f"{len(items)} file(s): {len(todo)} to upload, {len(skipped)} already on the server")
        return
    outcomes += upload(client, assignment, todo, instructor, jobs, quiet or as_json)
    by = {status: [o for o in outcomes if o.status == status] for status in ("uploaded", "identical", "skipped",
                                                                               "refused")}
    for o in by["refused"]:
        click.echo(f"refused: {o.item.path} ({o.item.student}): {o.message}", err=True)
    summary = (f"{len(items)} file(s): {len(by['uploaded'])} uploaded, "
               f"{len(by['skipped']) + len(by['identical'])} already on the server, {len(by['refused'])} refused")
    graded = None
    if wait:
        ids = sorted({o.submission["id"] for o in outcomes if o.submission and o.submission.get("id")})
        if not as_json:
            click.echo(summary)
        graded = follow(client, assignment, ids, timeout, quiet or as_json) if ids else {}
        c = batch.counts(graded.values())
        summary = f"graded {len(graded)}: {c['done']} done, {c['failed']} failed"
    if as_json:
        doc = {"assignment": assignment, "outcomes": [o.to_json() for o in outcomes]}
        if graded is not None:
            doc["graded"] = {str(i): s["status"] for i, s in sorted(graded.items())}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        click.echo(summary)
    failed = graded and any(s["status"] == "failed" for s in graded.values())
    if by["refused"] or failed:
        click.get_current_context().exit(EXIT_FAILED)


def upload(client: Client, slug: str, todo, instructor: bool, jobs: int, quiet: bool):
    """batch.upload_all with a progress bar on a terminal, or a line per file otherwise."""
    if not todo:
        return []
    total, done = len(todo), [0]
    bar = None
    if not quiet and progress_on():
        bar = click.progressbar(length=total, label="uploading", file=sys.stderr, show_pos=True)
        bar.__enter__()

    def on_done(o):
        done[0] += 1
        if bar is not None:
            bar.update(1)
        elif not quiet:
            sub = f" (submission {o.submission['id']})" if o.submission else ""
            click.echo(f"[{done[0]}/{total}] {o.status} {o.item.path} for {o.item.student}{sub}", err=True)
    try:
        return batch.upload_all(client, slug, todo, instructor, jobs, on_done)
    except ClientError as exc:
        exc.message += f"; {done[0]} of {total} uploaded before that: run the same command again to resume"
        raise
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


# ---------------------------------------------------------------- status, results

@click.command(epilog=EXIT_CODES)
@click.argument("ids", nargs=-1, type=int)
@assignment_option(required=False)
@click.option("--student", "-s", help="Only this student's submissions (instructors).")
@click.option("--all", "every", is_flag=True, help="Every submission, not only each student's latest.")
@click.option("--json", "as_json", is_flag=True, help="The submissions as JSON.")
@client_options
def status(ids, assignment, student, every, as_json, server, token):
    """Where submissions are: queued (and their place in line), running (which check), done or failed.

    \b
    Examples:
      grader status 17 18                 # these submissions
      grader status -a capstone           # each student's latest submission, and the counts
      grader status                       # the whole queue (instructors)
    """
    client = make_client(server, token)
    if ids:
        subs = [client.submission(i) for i in ids]
    elif assignment:
        subs = list(client.submissions(assignment, student=student))
        subs = subs if every else batch.latest_per_student(subs)
    else:
        q = client.queue()
        if as_json:
            click.echo(json.dumps(q, indent=2, sort_keys=True))
            return
        counts = q.get("counts", {})
        click.echo(", ".join(f"{counts.get(k, 0)} {k}" for k in ("queued", "running", "done", "failed")))
        for r in q.get("running", []):
            click.echo(f"  running {r['id']}: {r.get('check') or 'starting'} on {r.get('worker') or '?'}")
        return
    if as_json:
        click.echo(json.dumps(subs, indent=2, sort_keys=True))
        return
    for sub in subs:
        click.echo(f"{sub['id']:>6}  {sub['assignment']}  {sub['student']:<16} {describe(sub):<28} {sub['filename']}")
    if not ids:
        c = batch.counts(subs)
        click.echo(f"{len(subs)} submission(s): " + ", ".join(f"{c[k]} {k}" for k in ("queued", "running", "done",
                                                                                       "failed")))


@click.command(epilog=EXIT_CODES)
@click.argument("ids", nargs=-1, type=int)
@assignment_option(required=False)
@click.option("--student", "-s", help="Only this student's submissions (instructors).")
@click.option("--all", "every", is_flag=True, help="Every submission, not only each student's latest.")
@click.option("--csv", "fmt", flag_value="csv", help="A CSV row per submission: points and each check's status.")
@click.option("--json", "fmt", flag_value="json", help="The full results (reports and scores) as JSON.")
@click.option("--output", "-o", metavar="FILE", help="Write to FILE instead of stdout.")
@click.option("--jobs", "-j", default=4, show_default=True, type=click.IntRange(1, 32))
@client_options
def results(ids, assignment, student, every, fmt, output, jobs, server, token):
    """Each submission's result: points and the status of every check.

    \b
    Examples:
      grader results -a capstone                  # a table of each student's latest submission
      grader results -a capstone --csv -o results.csv
      grader results 17 --json
    """
    client = make_client(server, token)
    if ids:
        subs = [client.submission(i) for i in ids]
    elif assignment:
        subs = list(client.submissions(assignment, student=student))
        subs = subs if every else batch.latest_per_student(subs)
    else:
        raise BatchError("name submission ids or an --assignment")
    rows = batch.fetch_results(client, subs, jobs)
    if fmt == "csv":
        emit(batch.results_csv(rows), output)
    elif fmt == "json":
        emit(batch.results_json(rows) + "\n", output)
    else:
        lines = []
        for row in rows:
            sub, result = row["submission"], row["result"]
            score = (result or {}).get("score") or {}
            points = f"{score['total']:g}/{score['max']:g}" if score.get("total") is not None else "-"
            summary = ", ".join(f"{n} {s}" for s, n in (result or {}).get("report", {}).get("summary", {}).items())
            lines.append(f"{sub['id']:>6}  {sub['student']:<16} {sub['status']:<8} {points:>12}  {summary}")
        emit("\n".join(lines) + "\n" if lines else "no submissions\n", output)


# ---------------------------------------------------------------- regrade, rescore, export

@click.command(epilog=EXIT_CODES)
@click.argument("ids", nargs=-1, type=int)
@assignment_option(required=False)
@click.option("--wait", "-w", is_flag=True, help="Follow the new gradings until they finish.")
@click.option("--timeout", type=float, default=None, help="With --wait: give up after this many seconds.")
@click.option("--quiet", "-q", is_flag=True)
@click.option("--all", "every", is_flag=True, help="With -a: every submission, not only the counted ones.")
@click.option("--yes", "-y", is_flag=True, help="With -a: do not ask (the count is still printed).")
@client_options
def regrade(ids, assignment, wait, timeout, quiet, every, yes, server, token):
    """Run the judge again (the earlier result is kept): the submissions IDS, or in -a each student's counted
    submission (--all: every submission), after saying how many and asking.

    \b
    Examples:
      grader regrade 17 18 --wait
      grader regrade -a capstone
      grader regrade -a capstone --all --yes
    """
    client = make_client(server, token)
    if not ids and not assignment:
        raise BatchError("name submission ids, or an --assignment to regrade each student's counted submission")
    refused = []
    if ids:
        queued = []
        for i in ids:
            try:
                queued.append(client.regrade(i)["id"])
            except ClientError as exc:
                if exc.exit_code != EXIT_FAILED:
                    raise
                refused.append(i)
                click.echo(f"refused: submission {i}: {exc.message}", err=True)
    else:
        which = "all" if every else "counted"
        plan = client.regrade_assignment(assignment, which)
        skipped = plan["skipped"]["count"]
        click.echo(f"{plan['count']} {'counted ' if which == 'counted' else ''}submission(s) of {assignment} to "
                   f"regrade" + (f"; {skipped} skipped (already queued or running)" if skipped else ""))
        if not plan["count"]:
            return
        if not yes:
            click.confirm("Regrade them?", abort=True)
        queued = client.regrade_assignment(assignment, which, confirm=True)["queued"]
    click.echo(f"{len(queued)} submission(s) queued for regrading" + (f", {len(refused)} refused" if refused else ""))
    if wait and queued:
        slug = assignment or client.submission(queued[0])["assignment"]
        graded = follow(client, slug, queued, timeout, quiet)
        c = batch.counts(graded.values())
        click.echo(f"graded {len(graded)}: {c['done']} done, {c['failed']} failed")
        refused += [i for i, s in graded.items() if s["status"] == "failed"]
    if refused:
        click.get_current_context().exit(EXIT_FAILED)


@click.command(epilog=EXIT_CODES)
@assignment_option(required=False)
@click.option("--json", "as_json", is_flag=True, help="The full summary, with each changed score's diff.")
@client_options
def rescore(assignment, as_json, server, token):
    """Recompute scores from stored results with the server's current rubric; no student code runs.

    \b
    Examples:
      grader rescore -a capstone
      grader rescore            # every assignment
    """
    summary = make_client(server, token).rescore(assignment)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    click.echo(f"rescored {summary['rescored']} result(s) with rubric {summary['rubric_version']}; "
               f"{len(summary['changed'])} changed")
    for ch in summary["changed"]:
        click.echo(f"  submission {ch['submission']}: {ch['before']:g} -> {ch['after']:g}")


@click.command(epilog=EXIT_CODES)
@assignment_option(required=True)
@click.option("--csv", "fmt", flag_value="csv", default=True, help="The gradebook CSV: a row per roster student "
                                                                   "(default).")
@click.option("--json", "fmt", flag_value="json", help="The gradebook rows as JSON.")
@click.option("--gradescope", metavar="DIR", type=click.Path(file_okay=False, path_type=Path),
              help="Write DIR/<student>/results.json in Gradescope's format for each scored student.")
@click.option("--output", "-o", metavar="FILE", help="Write the CSV or JSON to FILE instead of stdout.")
@client_options
def export(assignment, fmt, gradescope, output, server, token):
    """The gradebook: for each roster student, the submission that counts (rubric policy) and its points.

    \b
    Examples:
      grader export -a capstone -o gradebook.csv
      grader export -a capstone --json
      grader export -a capstone --gradescope gradescope_results/
    """
    client = make_client(server, token)
    if gradescope:
        written, missing = batch.write_gradescope(client, assignment, gradescope)
        for student, why in missing:
            click.echo(f"not exported: {student}: {why}", err=True)
        click.echo(f"wrote {len(written)} results.json file(s) under {gradescope}; {len(missing)} student(s) "
                   f"without a scored submission")
        return
    if fmt == "json":
        emit(json.dumps(client.export(assignment), indent=2, sort_keys=True) + "\n", output)
    else:
        emit(client.export_csv(assignment), output)


# ---------------------------------------------------------------- config

@click.group("config")
def config_group():
    """The client's settings file (server, token, retries, timeout)."""


@config_group.command("show")
@click.option("--server", metavar="URL", help=SERVER_HELP)
@click.option("--token", metavar="TOKEN", help=TOKEN_HELP)
@handled
def config_show(server, token):
    """Each setting in effect and where it comes from (the token masked)."""
    s = settings_for(server, token)
    click.echo(f"config file: {client_settings.config_path()}")
    for key in client_settings.KINDS:
        value = client_settings.masked(s.token) if key == "token" else getattr(s, key)
        click.echo(f"{key:<8} {value}  ({s.sources[key]})")


@config_group.command("set")
@click.argument("key", type=click.Choice(list(client_settings.KINDS)))
@click.argument("value")
@handled
def config_set(key, value):
    """Set KEY to VALUE in the config file (created readable by you only).

    \b
    Examples:
      grader config set server https://grader.example.edu
      grader config set token gr_xxxxxxxx
    """
    path = client_settings.write_setting(key, value)
    click.echo(f"{key} set in {path}")


@config_group.command("path")
def config_path_cmd():
    """Print the config file's path (GRADER_CONFIG overrides it)."""
    click.echo(client_settings.config_path())

