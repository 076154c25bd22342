"""The instructor's assignment settings: a new assignment, its title, state, dates and course rules, its pinned rubric
(a TOML upload, every problem named with its line), and per-student extensions. A refused form comes back with what
was typed and why (422), as the manual-grade form does."""
from datetime import datetime

from flask import abort, flash, redirect, render_template, request, url_for

from .. import accounts, extensions, rubrics, rules, rules_text, store
from ..db import session
from ..models import ASSIGNMENT_STATES
from .common import form_number, signed_in
from .instructor import bp, instructor
from .rules_view import now_utc

RUBRIC_MAX_BYTES = 256 << 10
DATE_FIELDS = ("opens_at", "due_at")
# Form field -> (label, kind, store key); percents are shown as 10 and stored as 0.1
RULE_INPUTS = {"grace_minutes": ("Grace (minutes)", "number", "grace_minutes"),
               "late_per_day": ("Late penalty per started day (%)", "percent", "late_penalty_per_day"),
               "late_max": ("Late penalty at most (%)", "percent", "late_penalty_max"),
               "attempts": ("Attempts per period (0 = unlimited)", "whole", "attempts_per_period")}
CHOICES = {"period": ("day", "week", "term"), "counts": ("best", "latest", "chosen")}


def get_assignment(slug: str):
    try:
        return store.get_assignment(session(), slug)
    except store.NotFound:
        abort(404)


def local_input(dt: datetime | None) -> str:
    """A stored naive-UTC time as a datetime-local input's value (UTC, to the minute)."""
    return dt.strftime("%Y-%m-%dT%H:%M") if dt else ""


def percent_input(value) -> str:
    return "" if value is None else f"{value * 100:.4f}".rstrip("0").rstrip(".")


def form_of(a) -> dict:
    """The form's values for the assignment as stored (blank: the rubric's rule)."""
    own = a.rules or {}
    return {"title": a.title or "", "state": a.state or "open", "opens_at": local_input(a.opens_at),
            "due_at": local_input(a.due_at), "grace_minutes": "" if own.get("grace_minutes") is None
            else f"{own['grace_minutes']:g}", "late_per_day": percent_input(own.get("late_penalty_per_day")),
            "late_max": percent_input(own.get("late_penalty_max")),
            "attempts": "" if own.get("attempts_per_period") is None else str(own["attempts_per_period"]),
            "period": own.get("period") or "", "counts": own.get("counts") or ""}


def read_form(form) -> tuple[dict, dict, dict]:
    """(what was typed, the store's fields, problems by field): every field checked, each problem named."""
    typed = {k: (form.get(k) or "").strip() for k in ("title", "state", *DATE_FIELDS, *RULE_INPUTS, *CHOICES)}
    fields, errors = {"title": typed["title"]}, {}
    if typed["state"] not in ASSIGNMENT_STATES:
        errors["state"] = f"choose one of {', '.join(ASSIGNMENT_STATES)}"
    else:
        fields["state"] = typed["state"]
    for key in DATE_FIELDS:
        value = typed[key]
        if not value:
            fields[key] = None
            continue
        try:
            datetime.strptime(value[:16], "%Y-%m-%dT%H:%M")
        except ValueError:
            errors[key] = f"{value!r} is not a date and time such as 2026-12-18T23:59 (UTC)"
            continue
        fields[key] = value[:16] + ":00+00:00"  # the page says UTC: the inputs are UTC
    for key, (label, kind, store_key) in RULE_INPUTS.items():
        try:
            value = form_number(typed[key])
        except ValueError:
            errors[key] = f"{typed[key]!r} is not a number"
            continue
        if value is None:
            fields[store_key] = None  # blank: the rubric's rule
        elif kind == "percent":
            if not 0 <= value <= 100:
                errors[key] = "a percentage from 0 to 100"
            else:
                fields[store_key] = round(value / 100, 6)
        elif kind == "whole":
            if value != int(value) or value < 0:
                errors[key] = "a whole number, 0 or more (0 = unlimited)"
            else:
                fields[store_key] = int(value)
        elif value < 0:
            errors[key] = "a number of minutes, 0 or more"
        else:
            fields[store_key] = value
    for key, allowed in CHOICES.items():
        if typed[key] and typed[key] not in allowed:
            errors[key] = f"choose one of {', '.join(allowed)}"
        else:
            fields[key] = typed[key] or None
    if not errors and fields.get("opens_at") and fields.get("due_at") and fields["opens_at"] >= fields["due_at"]:
        errors["due_at"] = "the due date must be after the opening"
    return typed, fields, errors


def rubric_defaults(s, a) -> dict:
    """What each blank rule falls back to: the pinned (or packaged) rubric's [policy], for the placeholders."""
    rubric = rules.rubric_for(s, a)
    p = rubric.policy if rubric is not None else None
    if p is None:
        return {}
    return {"grace_minutes": f"{p.grace_minutes:g}", "late_per_day": percent_input(p.late_per_day),
            "late_max": percent_input(p.late_max), "attempts": str(p.attempts), "period": p.period,
            "counts": "latest" if p.counts == "last" else p.counts,
            "due_at": local_input(rules.naive(p.deadline)) if p.deadline else ""}


def problems_of(message: str) -> list[str]:
    """A store refusal as lines: a rubric's 'N problems in the rubric:' then one problem (with its line) a line."""
    return [line.strip() for line in message.splitlines() if line.strip()]


def settings_page(a, typed=None, errors=None, extension_typed=None, extension_errors=None, rubric_problems=None,
                  status: int = 200):
    """The whole settings page; after a refused form, that form shows what was typed and why."""
    s = session()
    class_rules = rules.rules_for(s, a)
    pinned = rubrics.get_rubric_version(s, a.rubric_id) if a.rubric_id is not None else None
    return render_template(
        "instructor/assignment_settings.html", a=a, form=typed or form_of(a), errors=errors or {},
        defaults=rubric_defaults(s, a), states=ASSIGNMENT_STATES, choices=CHOICES, inputs=RULE_INPUTS,
        words=rules_text.describe(class_rules, None, now_utc()), class_rules=class_rules, pinned=pinned,
        rubric_version=class_rules.rubric.version if class_rules.rubric is not None else None,
        extensions=extensions.list_extensions(s, a), students=accounts.list_students(s),
        ext_form=extension_typed or {"student": "", "until": "", "extra_attempts": "", "reason": ""},
        ext_errors=extension_errors or {}, rubric_problems=rubric_problems or []), status


@bp.get("/assignments/<slug>/settings")
@signed_in("instructor")
def assignment_settings(slug):
    return settings_page(get_assignment(slug))


@bp.post("/assignments/<slug>/settings")
@signed_in("instructor")
def save_settings(slug):
    s = session()
    a = get_assignment(slug)
    typed, fields, errors = read_form(request.form)
    if errors:
        return settings_page(a, typed, errors, status=422)
    try:
        store.update_assignment(s, slug, instructor(), **fields)
    except store.StoreError as exc:
        s.rollback()
        return settings_page(get_assignment(slug), typed, {"form": sentence(exc.message)}, status=422)
    rescored = a.rescored
    s.commit()
    flash(f"Saved the settings of {slug}." + (f" {rescored} stored result{'s' * (rescored != 1)} rescored under the "
                                              "new rules." if rescored else ""), "info")
    return redirect(url_for(".assignment_settings", slug=slug), 303)


def sentence(message: str) -> str:
    return message[:1].upper() + message[1:].rstrip(".") + "."


@bp.post("/assignments/<slug>/rubric")
@signed_in("instructor")
def upload_rubric(slug):
    """Pin a rubric file to the assignment (validated; every problem named with its line), or the packaged one."""
    s = session()
    a = get_assignment(slug)
    if request.form.get("packaged"):
        store.update_assignment(s, slug, instructor(), rubric_id=None)
        rescored = a.rescored
        s.commit()
        flash(f"{slug} is scored by the packaged rubric again." + rescored_words(rescored), "info")
        return redirect(url_for(".assignment_settings", slug=slug, _anchor="rubric"), 303)
    upload = request.files.get("rubric")
    if upload is None or not upload.filename:
        return settings_page(a, rubric_problems=["Choose a rubric file (TOML) to upload."], status=422)
    data = upload.read(RUBRIC_MAX_BYTES + 1)
    problems = []
    if len(data) > RUBRIC_MAX_BYTES:
        problems = [f"{upload.filename} is larger than {RUBRIC_MAX_BYTES >> 10} KiB."]
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            problems = [f"{upload.filename} is not UTF-8 text."]
    if not problems:
        try:
            store.update_assignment(s, slug, instructor(), rubric=text, rubric_filename=upload.filename)
        except store.StoreError as exc:
            s.rollback()
            problems = problems_of(exc.message)
    if problems:
        return settings_page(get_assignment(slug), rubric_problems=problems, status=422)
    rescored = a.rescored
    s.commit()
    flash(f"{slug} is now scored by {upload.filename}." + rescored_words(rescored), "info")
    return redirect(url_for(".assignment_settings", slug=slug, _anchor="rubric"), 303)


def rescored_words(n) -> str:
    return f" {n} stored result{'s' * (n != 1)} rescored." if n else ""


@bp.post("/assignments/<slug>/extensions")
@signed_in("instructor")
def give_extension(slug):
    """Give a student an extension (a new due date in UTC, extra attempts, or both), replacing theirs."""
    s = session()
    a = get_assignment(slug)
    typed = {k: (request.form.get(k) or "").strip() for k in ("student", "until", "extra_attempts", "reason")}
    errors, student, until, extra = {}, None, None, 0
    try:
        student = accounts.get_student(s, typed["student"])
    except store.NotFound:
        errors["student"] = "choose a student on the roster"
    if typed["until"]:
        try:
            datetime.strptime(typed["until"][:16], "%Y-%m-%dT%H:%M")
            until = typed["until"][:16] + ":00+00:00"
        except ValueError:
            errors["until"] = f"{typed['until']!r} is not a date and time such as 2026-12-21T23:59 (UTC)"
    try:
        number = form_number(typed["extra_attempts"])
        if number is not None and (number != int(number) or number < 0):
            raise ValueError
        extra = int(number or 0)
    except ValueError:
        errors["extra_attempts"] = "a whole number, 0 or more"
    if not errors and until is None and not extra:
        errors["until"] = "give a new due date, extra attempts, or both"
    if not errors:
        try:
            extensions.set_extension(s, a, student, due_at=until, extra_attempts=extra, reason=typed["reason"],
                                     instructor=instructor())
        except store.StoreError as exc:
            s.rollback()
            errors["form"] = sentence(exc.message)
    if errors:
        return settings_page(get_assignment(slug), extension_typed=typed, extension_errors=errors, status=422)
    s.commit()
    flash(f"{student.username} has an extension on {slug}.", "info")
    return redirect(url_for(".assignment_settings", slug=slug, _anchor="extensions"), 303)


@bp.post("/assignments/<slug>/extensions/<username>/remove")
@signed_in("instructor")
def remove_extension(slug, username):
    s = session()
    a = get_assignment(slug)
    try:
        student = accounts.get_student(s, username)
    except store.NotFound:
        abort(404)
    extensions.remove_extension(s, a, student)  # none: a 404 page saying so
    s.commit()
    flash(f"{username}'s extension on {slug} is removed: the class's rules apply to them again.", "info")
    return redirect(url_for(".assignment_settings", slug=slug, _anchor="extensions"), 303)


@bp.route("/assignments/new", methods=["GET", "POST"])
@signed_in("instructor")
def new_assignment():
    """A new assignment: its slug, then the same settings as an existing one's."""
    if request.method == "GET":
        return render_template("instructor/assignment_new.html", slug="", title="", state="draft",
                               states=ASSIGNMENT_STATES, errors={})
    s = session()
    slug, title = (request.form.get("slug") or "").strip(), (request.form.get("title") or "").strip()
    state = request.form.get("state") or "draft"
    errors = {}
    if state not in ASSIGNMENT_STATES:
        errors["state"] = f"choose one of {', '.join(ASSIGNMENT_STATES)}"
    if not errors:
        try:
            store.create_assignment(s, slug, instructor(), title=title, state=state)
        except store.StoreError as exc:
            s.rollback()
            errors["slug"] = sentence(exc.message)
    if errors:
        return render_template("instructor/assignment_new.html", slug=slug, title=title, state=state,
                               states=ASSIGNMENT_STATES, errors=errors), 422
    s.commit()
    flash(f"Created {slug} ({state}). Set its dates and rules below.", "info")
    return redirect(url_for(".assignment_settings", slug=slug), 303)


@bp.get("/assignments")
@signed_in("instructor")
def assignments_list():
    """Every assignment, archived ones too (the dashboard leaves those out), with its state and dates."""
    s = session()
    rows = [{"a": a, "rules": rules.rules_for(s, a), "extensions": len(extensions.list_extensions(s, a))}
            for a in store.list_assignments(s, include_archived=True)]
    return render_template("instructor/assignments.html", rows=rows)
