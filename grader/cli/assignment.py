"""`grader assignment create | update | extend | show | list`: assignments and their course rules on this host's
database (the same store functions as the API: grader/app/store.py, rules.py, extensions.py).

Times are ISO 8601 WITH a zone (2026-12-18T23:59:00Z or 2026-12-18T23:59:00+01:00); one without a zone is refused,
since "23:59" in whose time zone would be a guess. flask and sqlalchemy are imported inside the commands.
"""
import json
import os

import click

from .local import or_fail

TIME = "ISO 8601 with its zone, e.g. 2026-12-18T23:59:00Z; a time without a zone is refused"
STATES = ("draft", "open", "closed", "archived")


def rule_options(create: bool):
    """The options create and update share; on update every default is None, so only the given ones change."""
    def decorate(fn):
        options = [
            click.option("--title", default="" if create else None),
            click.option("--track", type=click.Choice(["reverse", "lm"]), default=None, help="Default: either track."),
            click.option("--checks", default=None, help="Comma-separated check ids (default: all, as `grader check`)."),
            click.option("--seed", type=int, default=None, help="Default: the judge's seed, as `grader check`."),
            click.option("--stage-s", type=float, default=None, help="Seconds per check (default: the judge's)."),
            click.option("--rubric", "rubric_file", type=click.Path(exists=True, dir_okay=False), default=None,
                         help="A rubric file (TOML): validated, stored as a version, and pinned to the assignment. "
                              "Default: the packaged rubric."),
            click.option("--state", type=click.Choice(STATES), default=None,
                         help="draft: instructors only; open: students upload; closed: visible, no uploads; "
                              "archived: hidden.  [create default: open]"),
            click.option("--opens", default=None, help=f"When uploads open ({TIME})."),
            click.option("--due", default=None, help=f"The due date ({TIME}); default: the rubric policy's deadline."),
            click.option("--grace", type=float, default=None, help="Minutes after the due date still on time."),
            click.option("--late-per-day", type=float, default=None,
                         help="Fraction of the score lost per started day late (0.1 = 10%)."),
            click.option("--late-max", type=float, default=None, help="The most the late penalty takes (fraction)."),
            click.option("--attempts", type=int, default=None, help="Uploads per student per period; 0 = unlimited."),
            click.option("--period", type=click.Choice(["day", "week", "term"]), default=None,
                         help="The attempt limit's period."),
            click.option("--timezone", default=None, help="IANA zone whose midnight starts a day (e.g. Europe/Berlin)."),
            click.option("--counts", type=click.Choice(["best", "latest", "chosen"]), default=None,
                         help="Which submission counts (chosen: the one the student marks; else their latest)."),
        ]
        if not create:
            options.append(click.option("--packaged-rubric", is_flag=True,
                                        help="Pin the packaged rubric again (instead of --rubric)."))
        for option in reversed(options):
            fn = option(fn)
        return fn
    return decorate


RULE_OPTIONS = {"grace": "grace_minutes", "late_per_day": "late_penalty_per_day", "late_max": "late_penalty_max",
                "attempts": "attempts_per_period", "period": "period", "timezone": "timezone", "counts": "counts"}


def fields_from(options: dict, create: bool) -> dict:
    """The store's fields from the command's options: only the given ones (on create, title and checks always)."""
    fields = {}
    for key in ("title", "track", "seed", "state"):
        if options.get(key) is not None or (create and key in ("title",)):
            fields[key] = options[key]
    if options.get("checks") is not None or create:
        fields["checks"] = [c.strip() for c in (options.get("checks") or "").split(",") if c.strip()]
    if options.get("stage_s") is not None:
        fields["limits"] = {"stage_s": options["stage_s"]}
    if options.get("opens") is not None:
        fields["opens_at"] = options["opens"]
    if options.get("due") is not None:
        fields["due_at"] = options["due"]
    for option, rule in RULE_OPTIONS.items():
        if options.get(option) is not None:
            fields[rule] = options[option]
    if options.get("rubric_file"):
        if options.get("packaged_rubric"):
            raise click.UsageError("give --rubric FILE or --packaged-rubric, not both")
        with open(options["rubric_file"], "rb") as fh:
            fields["rubric"] = fh.read()
        fields["rubric_filename"] = os.path.basename(options["rubric_file"])
    elif options.get("packaged_rubric"):
        fields["rubric_id"] = None
    return fields


@click.group()
def assignment():
    """Assignments: which checks, seed and limits a submission is graded with, and the course rules (rubric, state,
    dates, late policy, attempts, which submission counts, extensions)."""


@assignment.command("create")
@click.argument("slug")
@rule_options(create=True)
def assignment_create(slug, **options):
    """Create an assignment (its rules default to its rubric's [policy])."""
    from ..app import store
    fields = fields_from(options, create=True)
    or_fail(lambda s: store.create_assignment(s, slug, **fields))
    click.echo(f"created assignment {slug}")


@assignment.command("update")
@click.argument("slug")
@rule_options(create=False)
def assignment_update(slug, **options):
    """Change only the given settings. A new rubric, due date, grace or late penalty rescores the assignment's
    stored results (no code runs)."""
    from ..app import store
    fields = fields_from(options, create=False)
    if not fields:
        raise click.UsageError("nothing to change: give at least one option (see --help)")
    rescored = or_fail(lambda s: store.update_assignment(s, slug, **fields).rescored)
    click.echo(f"updated assignment {slug}" + (f"; rescored {rescored} results" if rescored is not None else ""))


@assignment.command("extend")
@click.argument("slug")
@click.argument("student")
@click.option("--until", default=None, help=f"The student's own due date ({TIME}).")
@click.option("--extra-attempts", type=click.IntRange(min=0), default=0, show_default=True,
              help="Uploads added to every period's limit.")
@click.option("--reason", default="", help="Why (kept with the extension).")
@click.option("--remove", is_flag=True, help="Take the student's extension away instead.")
def assignment_extend(slug, student, until, extra_attempts, reason, remove):
    """Give STUDENT exactly this extension on SLUG (replacing theirs); their results are rescored."""
    from ..app import accounts, extensions, store

    def run(s):
        a, st = store.get_assignment(s, slug), accounts.get_student(s, student)
        if remove:
            return extensions.remove_extension(s, a, st)
        return extensions.set_extension(s, a, st, due_at=until, extra_attempts=extra_attempts, reason=reason)[1]
    if remove and (until or extra_attempts):
        raise click.UsageError("--remove takes no --until or --extra-attempts")
    rescored = or_fail(run)
    done = "removed the extension of" if remove else "extended"
    click.echo(f"{done} {student} on {slug}; rescored {rescored} results")


def effective(s, a) -> dict:
    """The assignment's rules in force, as `show` prints them."""
    from ..app import extensions, rules
    r = rules.rules_for(s, a)

    def when(dt):
        return dt.isoformat(timespec="minutes").replace("+00:00", "Z") if dt else None
    return {"slug": a.slug, "title": a.title, "state": r.state, "opens_at": when(r.opens_at),
            "due_at": when(r.due_at), "grace_minutes": r.grace_minutes, "late_penalty_per_day": r.late_per_day,
            "late_penalty_max": r.late_max, "attempts_per_period": r.attempts, "period": r.period,
            "timezone": r.timezone, "counts": r.counts,
            "rubric": (f"{r.rubric.version} (stored id {a.rubric_id})" if a.rubric_id else
                       f"{r.rubric.version} (packaged)") if r.rubric is not None else None,
            "overrides": dict(a.rules or {}), "track": a.track, "checks": list(a.checks or []) or "all",
            "seed": a.seed, "limits": a.limits or {},
            "extensions": [{"student": name, "until": when(rules.utc(ext.due_at)),
                            "extra_attempts": ext.extra_attempts, "reason": ext.reason}
                           for ext, name in extensions.list_extensions(s, a)]}


@assignment.command("show")
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def assignment_show(slug, as_json):
    """The assignment's rules in force: its own settings over its rubric's [policy], and its extensions."""
    from ..app import store
    d = or_fail(lambda s: effective(s, store.get_assignment(s, slug)))
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    for key, value in d.items():
        if key == "extensions":
            continue
        if key == "attempts_per_period" and not value:
            value = "unlimited"
        click.echo(f"{key:21} {value if value is not None else '-'}")
    for ext in d["extensions"]:
        click.echo(f"{'extension':21} {ext['student']}: until {ext['until'] or '(the due date)'}, "
                   f"+{ext['extra_attempts']} attempts{' (' + ext['reason'] + ')' if ext['reason'] else ''}")


@assignment.command("list")
@click.option("--all", "everything", is_flag=True, help="Archived assignments too.")
def assignment_list(everything):
    """Assignments, one a line: slug, state, opens, due, which submission counts, rubric version."""
    from ..app import rules, store

    def rows(s):
        out = []
        for a in store.list_assignments(s, include_archived=everything):
            r = rules.rules_for(s, a)
            out.append((a.slug, r.state, r.opens_at.isoformat(timespec="minutes") if r.opens_at else "-",
                        r.due_at.isoformat(timespec="minutes") if r.due_at else "-", r.counts,
                        r.rubric.version if r.rubric is not None else "-"))
        return out
    for row in or_fail(rows):
        click.echo("\t".join(row))
