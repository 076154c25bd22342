"""The instructor's feedback page of an assignment: what students see of each rubric item and category (hidden,
points, summary or full), now and from a date on (e.g. full at the due date). Levels are visibility.py's."""
from flask import flash, redirect, render_template, request, url_for

from .. import store, visibility
from ..db import session
from ..models import FEEDBACK_LEVELS
from .common import signed_in
from .instructor import bp, get_assignment, instructor

MEANING = {"hidden": "nothing: not its points, not its check's message; the total leaves it out",
           "points": "its points only, no message",
           "summary": "its points and the check's one-line message (no details, numbers or output)",
           "full": "everything: points, message, details, measurements and what the code printed"}


def due_of(s, a):
    """The assignment's due date (naive UTC), or None when it has none."""
    try:
        return visibility.due_date(s, a)
    except store.StoreError:
        return None


def render(s, a, errors: dict | None = None, status: int = 200):
    rows = visibility.rule_rows(s, a)
    return render_template("instructor/feedback.html", a=a, rows=rows, levels=FEEDBACK_LEVELS, meaning=MEANING,
                           due=due_of(s, a), errors=errors or {}, form=request.form if errors else None), status


@bp.get("/assignments/<slug>/feedback")
@signed_in("instructor")
def feedback(slug):
    s = session()
    return render(s, get_assignment(slug))


def wanted(key: str) -> tuple:
    """(level, later_level, switch_at) the form asks for `key`; level "" is the rubric's default."""
    level = request.form.get(f"level_{key}", "")
    later = request.form.get(f"later_{key}", "") or None
    if request.form.get(f"due_{key}"):
        when = visibility.DUE
    else:
        when = request.form.get(f"at_{key}", "").strip() or None
    return level, later, when


@bp.post("/assignments/<slug>/feedback")
@signed_in("instructor")
def save_feedback(slug):
    """Every row of the form at once; a row that did not change keeps its rule (and the date it was set)."""
    s = session()
    a = get_assignment(slug)
    errors, changed = {}, 0
    for row in visibility.rule_rows(s, a):
        key = row["key"]
        level, later, when = wanted(key)
        if not level:
            if later:
                errors[key] = f"{row['title']}: choose its level now before a later one"
            elif row["level"] is not None:
                visibility.clear_rule(s, a, key)
                changed += 1
            continue
        try:
            at_due = when == visibility.DUE
            at = visibility.due_date(s, a) if at_due else visibility.parse_when(when, naive_is_utc=True)
            if (level, later, at if later else None, at_due and bool(later)) == \
                    (row["level"], row["later_level"], row["switch_at"], row["switch_at_due"]):
                continue
            # "at the due date" is kept as such: the switch follows a later change of the due date
            visibility.set_rule(s, a, key, level, later, (visibility.DUE if at_due else at) if later else None,
                                instructor())
            changed += 1
        except store.StoreError as exc:
            errors[key] = f"{row['title']}: {exc.message}"
    if errors:
        s.rollback()
        return render(s, a, errors, 422)
    s.commit()
    flash(f"Saved: {changed} rule{'s' * (changed != 1)} changed for {slug}." if changed else "Nothing changed.",
          "info")
    return redirect(url_for(".feedback", slug=slug), 303)
