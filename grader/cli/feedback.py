"""`grader assignment feedback SLUG KEY LEVEL [--then LEVEL --at ISO|due]`: what students see of a rubric item or a
whole category on this host's database (grader/app/visibility.py; the same as the instructor page and the API)."""
import click

from .local import or_fail

LEVELS = ("hidden", "points", "summary", "full")  # grader.app.models.FEEDBACK_LEVELS (flask stays unloaded here)


@click.command("feedback")
@click.argument("slug")
@click.argument("key")
@click.argument("level", type=click.Choice([*LEVELS, "default"]))
@click.option("--then", "later", type=click.Choice(LEVELS), default=None,
              help="The level from --at on (e.g. full after the due date).")
@click.option("--at", "switch_at", default=None, metavar="ISO|due",
              help='When --then starts: ISO 8601 with a zone (Z or +01:00), or "due" for the assignment\'s due date.')
def assignment_feedback(slug, key, level, later, switch_at):
    """Set what students see of rubric item or category KEY: hidden, points, summary or full (default: the
    rubric's visibility)."""
    if (later is None) != (switch_at is None):
        raise click.UsageError("--then and --at go together: the later level and when it starts")

    def apply(s):
        from ..app import store, visibility
        a = store.get_assignment(s, slug)
        if key not in visibility.known_keys(visibility.rubric_of(s, a)):
            raise store.StoreError(f"{key!r} is not an item or category of {slug}'s rubric")
        if level == "default":
            visibility.clear_rule(s, a, key)
        else:
            visibility.set_rule(s, a, key, level, later, switch_at)
        return next(r for r in visibility.rule_rows(s, a) if r["key"] == key)

    row = or_fail(apply)
    due = " (the due date, following it if it moves)" if row["switch_at_due"] else ""
    then = f"; {row['later_level']} from {row['switch_at']:%Y-%m-%d %H:%M} UTC{due}" if row["later_level"] else ""
    click.echo(f"{slug} {key}: {row['level'] or 'default (' + row['default'] + ')'}{then}; students see "
               f"{row['effective']} now")
