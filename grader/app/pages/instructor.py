"""Instructor pages: every submission at a glance, a student's history, one submission in full with the report beside
the automatic scores, manual grading, regrades, the score distribution, releases, CSV export and roster import."""
from flask import (Blueprint, abort, current_app, flash, jsonify, redirect, render_template, request,
                   url_for)

from .. import accounts, coursework, grading, store, visibility
from ..db import session
from ..files import submission_file
from ..models import SUBMISSION_STATUSES, Submission
from ..queue import commit_and_send
from .student import report_response
from .common import (form_number, guarded_sign_in, safe_next, setup_blueprint, sign_in, sign_out,
                  signed_in, who)
from .charts import histogram
from ..rules import rubric_for
from .results import manual_form_items, manual_grades, result_view, status_json

bp = setup_blueprint(Blueprint("instructor", __name__, url_prefix="/instructor"))


def instructor():
    return accounts.active_instructor(session(), who()["id"])


def get_sub(submission_id: int) -> Submission:
    sub = store.find_submission(session(), submission_id)
    if sub is None:
        abort(404)
    return sub


@bp.route("/signin", methods=["GET", "POST"])
def signin():
    if request.method == "GET":
        return render_template("instructor/signin.html", username="", error=None)
    username = request.form.get("username", "").strip()
    password = request.form.get("password", "")
    row, failure = guarded_sign_in(
        f"signin:instructor:{username}", "Too many failed sign-ins for this username",
        "Unknown username or wrong password.",
        lambda s: accounts.authenticate_instructor(s, username, password),
        lambda error: render_template("instructor/signin.html", username=username, error=error))
    if failure:
        return failure
    sign_in("instructor", id=row.id, username=row.username, name=row.name or row.username)
    return redirect(safe_next(request.args.get("next"), url_for(".dashboard")), 303)


@bp.post("/signout")
def signout():
    sign_out()
    flash("You are signed out.", "info")
    return redirect(url_for(".signin"), 303)


# ---------------------------------------------------------------- the class at a glance

def dashboard_filters() -> tuple[dict, list[str]]:
    """The dashboard's query: assignment, student, status, score range, sort and order (bad values are named)."""
    args, problems = request.args, []
    f = {"assignment": args.get("assignment", ""), "student": args.get("student", "").strip(),
         "status": args.get("status", ""), "min": args.get("min", ""), "max": args.get("max", ""),
         "sort": args.get("sort", "submitted"), "order": args.get("order", "desc")}
    if f["status"] and f["status"] not in SUBMISSION_STATUSES:
        problems.append(f"unknown status {f['status']!r}")
        f["status"] = ""
    if f["sort"] not in coursework.SORTS:
        f["sort"] = "submitted"
    for bound in ("min", "max"):
        try:
            f[bound + "_value"] = form_number(f[bound])
        except ValueError:
            problems.append(f"the {bound}imum score must be a number")
            f[bound + "_value"] = None
    return f, problems


@bp.get("/")
@signed_in("instructor")
def dashboard():
    s = session()
    f, problems = dashboard_filters()
    assignments = store.list_assignments(s)
    assignment = None
    if f["assignment"]:
        try:
            assignment = store.get_assignment(s, f["assignment"])
        except store.NotFound:
            problems.append(f"no assignment {f['assignment']!r}")
    rows = coursework.submission_rows(s, assignment, f["student"] or None, f["status"] or None,
                                     min_score=f["min_value"], max_score=f["max_value"], sort=f["sort"],
                                     descending=f["order"] != "asc")
    return render_template("instructor/dashboard.html", rows=rows, f=f, problems=problems, assignments=assignments,
                           counts=store.queue_counts(s), statuses=SUBMISSION_STATUSES, sorts=coursework.SORTS,
                           marks=grading.marks(s, rows))


@bp.get("/students/<username>")
@signed_in("instructor")
def student(username):
    s = session()
    try:
        st = accounts.get_student(s, username)
    except store.NotFound:
        abort(404)
    rows = coursework.submission_rows(s, student_id=st.id, sort="submitted")
    return render_template("instructor/student.html", student=st, rows=rows,
                           counted={i for i, m in grading.marks(s, rows).items() if m["counted"]})


# ---------------------------------------------------------------- one submission

@bp.get("/submissions/<int:submission_id>")
@signed_in("instructor")
def submission(submission_id):
    return submission_page(get_sub(submission_id))


def submission_page(sub: Submission, errors: dict | None = None, typed=None):
    """One submission in full; after a refused save the manual form shows what was typed (`typed`) and why."""
    s = session()
    view = result_view(s, sub, for_student=False)
    report = coursework.report_of(s, sub)
    report_text = None
    if report is not None and report.kind == "markdown":
        report_text = report.content.decode("utf-8", errors="replace")
    return render_template("instructor/submission.html", sub=sub, view=view,
                           status=status_json(s, sub, for_student=False), report=report, report_text=report_text,
                           lines=grading.source_view(s, sub),
                           manual=manual_form_items(view["score"], sub.manual, rubric_for(s, sub.assignment)),
                           history=coursework.manual_history(s, sub), attempts=store.attempts_of(s, sub),
                           results=store.results_of(s, sub), poll_s=current_app.config["WEB_POLL_S"],
                           status_url=url_for(".status", submission_id=sub.id), errors=errors or {},
                           typed=typed)


@bp.get("/submissions/<int:submission_id>/status.json")
@signed_in("instructor")
def status(submission_id):
    return jsonify(status_json(session(), get_sub(submission_id), for_student=False))


@bp.post("/submissions/<int:submission_id>/manual")
@signed_in("instructor")
def grade(submission_id):
    """Points and comments for the manual items; a blank points field leaves that item as it is."""
    s = session()
    sub = get_sub(submission_id)
    grades, errors = manual_grades(manual_form_items(None, sub.manual, rubric_for(s, sub.assignment)), request.form)
    if errors:  # the page again, with what was typed: nothing of it is lost
        return submission_page(sub, errors, request.form), 422
    if not grades:
        flash("No changes to save.", "manual")
        return redirect(url_for(".submission", submission_id=sub.id, _anchor="manual"), 303)
    row = coursework.grade_manual(s, sub, grades, instructor())
    s.commit()
    total = f" Total now {row.total:g} of {row.max:g}." if row else " It counts once the submission is graded."
    flash(f"Saved {len(grades)} manual grade{'s' * (len(grades) > 1)}.{total}", "manual")  # shown by the form
    return redirect(url_for(".submission", submission_id=sub.id, _anchor="manual"), 303)


@bp.post("/submissions/<int:submission_id>/regrade")
@signed_in("instructor")
def regrade(submission_id):
    s = session()
    sub = store.request_regrade(s, get_sub(submission_id))
    commit_and_send(current_app, s, [sub])
    flash(f"Submission {sub.id} queued for regrading (request {sub.request}); the earlier result is kept.", "info")
    return redirect(url_for(".submission", submission_id=sub.id), 303)


@bp.get("/submissions/<int:submission_id>/report")
@signed_in("instructor")
def report(submission_id):
    row = coursework.report_of(session(), get_sub(submission_id))
    if row is None:
        abort(404)
    return report_response(row, inline=request.args.get("download") is None)


@bp.get("/submissions/<int:submission_id>/file")
@signed_in("instructor")
def file(submission_id):
    return submission_file(get_sub(submission_id))


# ---------------------------------------------------------------- an assignment

def get_assignment(slug: str):
    try:
        return store.get_assignment(session(), slug)
    except store.NotFound:
        abort(404)


@bp.route("/assignments/<slug>/regrade", methods=["GET", "POST"])
@signed_in("instructor")
def regrade_all(slug):
    """First how many it would regrade (counted submissions, or all), then, once confirmed, regrade them."""
    s = session()
    a = get_assignment(slug)
    which = request.values.get("which", "counted")
    if which not in store.REGRADE_WHICH:
        which = "counted"
    if request.method == "POST" and request.form.get("confirm") == "yes":
        subs = store.run_regrade(s, store.regrade_plan(s, a, which))
        commit_and_send(current_app, s, subs)
        flash(f"Queued {len(subs)} {'counted ' if which == 'counted' else ''}submission{'s' * (len(subs) != 1)} "
              f"of {slug} for regrading.", "info")
        return redirect(url_for(".dashboard", assignment=slug), 303)
    plans = {w: store.regrade_plan(s, a, w) for w in store.REGRADE_WHICH}
    return render_template("instructor/regrade_confirm.html", a=a, which=which, plans=plans)


@bp.get("/assignments/<slug>")
@signed_in("instructor")
def assignment(slug):
    """The score distribution (a histogram per category, from each student's counted submission) and releases."""
    s = session()
    a = get_assignment(slug)
    dist = coursework.distribution(s, a)
    charts = [histogram(dist["total"]["values"], dist["total"]["max"], title="Total", width=720, height=230)]
    charts += [histogram(c["values"], c["max"], title=f"{c['title']} (of {c['max']:g})") for c in dist["categories"]]
    rubric = visibility.rubric_of(s, a)  # the assignment's pinned rubric: its hidden items are the ones to release
    hidden = []
    if rubric is not None:
        for cat in rubric.categories:
            items = [i for i in cat.items if i.visibility == "hidden"]
            if items:
                hidden.append({"id": cat.id, "title": cat.title, "all": len(items) == len(cat.items),
                               "items": [{"id": i.id, "title": i.title, "points": i.points} for i in items]})
    return render_template("instructor/assignment.html", a=a, dist=dist, charts=charts, hidden=hidden,
                           released=coursework.released_keys(s, a))


@bp.post("/assignments/<slug>/releases")
@signed_in("instructor")
def releases(slug):
    s = session()
    a = get_assignment(slug)
    keys = coursework.set_releases(s, a, request.form.getlist("release"), instructor())
    s.commit()
    flash(f"Students of {slug} now see {len(keys)} released item{'s' * (len(keys) != 1)} or categor"
          f"{'ies' if len(keys) != 1 else 'y'} that were hidden." if keys else
          f"Hidden items of {slug} are hidden from students again.", "info")
    return redirect(url_for(".assignment", slug=slug), 303)


# The roster page is in roster.py, the gradebook export in gradebook.py (on this blueprint).
