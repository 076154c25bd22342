"""Student pages: sign in with roster id and token, submit a module (and a report), watch it graded, read the result.

Every page shows only the signed-in student's own submissions: another's looks exactly like a missing one (404).
"""
from flask import (Blueprint, Response, abort, current_app, flash, jsonify, redirect, render_template, request,
                   url_for)

from ...source import Rejected
from .. import accounts, coursework, rules, store
from ..db import session
from ..files import content_disposition, submission_file
from ..models import Submission
from ..queue import commit_and_send
from .common import (RateLimited, allows_upload, check_rate, count_rate, guarded_sign_in, safe_next, setup_blueprint,
                  sign_in, sign_out, signed_in, who)
from . import common, rules_view
from .results import result_view, status_json

bp = setup_blueprint(Blueprint("student", __name__))


def me():
    return accounts.get_student(session(), who()["username"])


def own_submission(submission_id: int) -> Submission:
    """The signed-in student's submission; anyone else's is a 404, exactly like one that does not exist."""
    sub = store.find_submission(session(), submission_id)
    if sub is None or sub.student_id != who()["student_id"]:
        abort(404)
    return sub


@bp.get("/")
def home():
    data = who()
    if data is None:
        return redirect(url_for(".signin"))
    return redirect(url_for(".submit") if data["role"] == "student" else url_for("instructor.dashboard"))


@bp.route("/signin", methods=["GET", "POST"])
def signin():
    if request.method == "GET":
        return render_template("student/signin.html", username="", error=None)
    username = request.form.get("username", "").strip()
    token = request.form.get("token", "").strip()
    if not username or not token:
        return render_template("student/signin.html", username=username,
                               error="Enter your roster id and your access token."), 400
    try:
        principal, failure = guarded_sign_in(
            f"signin:student:{username}", "Too many failed sign-ins for this roster id",
            "That roster id and access token do not match an active student token.",
            lambda s: accounts.authenticate_student(s, username, token),
            lambda error: render_template("student/signin.html", username=username, error=error),
            check_first=True)  # a token is 256 random bits: checking it even from a failing address guesses nothing
    except accounts.Inactive as exc:  # the right token of a deactivated or removed student: say why, not "wrong"
        return render_template("student/signin.html", username=username,
                               error=exc.message[0].upper() + exc.message[1:] + "."), 403
    if failure:
        return failure
    student = accounts.get_student(session(), username)
    sign_in("student", student_id=student.id, username=username, token_id=principal.token_id,
            name=student.name or username)
    return redirect(safe_next(request.args.get("next"), url_for(".submit")), 303)


@bp.post("/signout")
def signout():
    sign_out()
    flash("You are signed out.", "info")
    return redirect(url_for(".signin"), 303)


def submit_page(errors: dict | None = None, chosen: str | None = None, status: int = 200):
    """The form, with every assignment the student can see and its rules in words (closed or unopened ones disabled)."""
    s = session()
    student = me()
    shown = rules_view.student_assignments(s, student)
    open_now = [r["assignment"].slug for r in shown if r["refusal"] is None]
    rows = coursework.submission_rows(s, student_id=student.id, limit=10)
    return render_template("student/submit.html", assignments=shown, errors=errors or {},
                           chosen=chosen or (open_now[0] if len(open_now) == 1 else ""),
                           history=[history_row(s, r) for r in rows],
                           report_mib=current_app.config["WEB_REPORT_MAX_BYTES"] >> 20), status


@bp.route("/submit", methods=["GET", "POST"])
@signed_in("student")
@allows_upload("WEB_REPORT_MAX_BYTES")
def submit():
    if request.method == "GET":
        return submit_page()
    s = session()
    errors = {}
    slug = request.form.get("assignment", "").strip()
    assignment = None
    if not slug:
        errors["assignment"] = "Choose the assignment you are submitting for."
    else:
        try:
            assignment = store.get_assignment(s, slug)
        except store.NotFound:
            assignment = None
        if assignment is None or not rules_view.visible_to_students(assignment):
            errors["assignment"] = f"There is no assignment {slug!r}."  # a draft looks exactly like a missing one
            assignment = None
        else:
            why = rules_view.refusal(rules.rules_for(s, assignment, me()), rules_view.now_utc())
            if why:
                errors["assignment"] = f"{assignment.title or assignment.slug} is {why}."
    module = request.files.get("module")
    if module is None or not module.filename:
        errors["module"] = "Choose your Python module (a .py file) to upload."
    elif not module.filename.endswith(".py"):
        errors["module"] = f"{module.filename}: the module must be a Python file ending in .py."
    report, report_kind = request.files.get("report"), None
    report_data = b""
    if report is not None and report.filename:
        report_data = report.read()
        try:
            report_kind = coursework.validate_report(report_data, report.filename,
                                                     current_app.config["WEB_REPORT_MAX_BYTES"])
        except store.StoreError as exc:
            errors["report"] = exc.message[0].upper() + exc.message[1:] + "."
    if errors:
        return submit_page(errors, slug, 422)
    student = me()
    key = f"upload:student:{student.id}"
    try:
        check_rate(key, "WEB_UPLOAD_LIMIT", "WEB_UPLOAD_WINDOW_S", "You are submitting faster than the service allows")
    except RateLimited as exc:
        return submit_page({"form": exc.message}, slug, 429)
    count_rate(key)
    data = module.read()
    try:
        upload = store.create_submission(s, assignment, student, data, module.filename,
                                         archive_dir=current_app.config["SUBMISSIONS_DIR"],
                                         enforce_attempts=current_app.config["ENFORCE_ATTEMPTS"])
    except Rejected as exc:
        s.rollback()
        return submit_page({"module": f"{module.filename}: {exc}"}, slug, 422)
    except store.StoreError as exc:  # too many attempts (429), or the assignment closed meanwhile (403)
        s.rollback()
        return submit_page({"form": exc.message[0].upper() + exc.message[1:].rstrip(".") + "."}, slug, exc.status)
    sub = upload.submission
    if report_kind:
        coursework.attach_report(s, sub, report_data, report.filename, report_kind)
    commit_and_send(current_app, s, [sub] if upload.created else [])
    if upload.created:
        flash(f"Submission {sub.id} received and queued for grading."
              + (f" It is identical to your earlier submission {sub.same_as}." if upload.duplicate else ""), "info")
    else:
        flash(f"This module is identical to your latest submission ({sub.id}), so it was not queued again"
              + ("; the report was attached to it." if report_kind else "."), "info")
    return redirect(url_for(".submission", submission_id=sub.id), 303)


def history_row(s, row: dict) -> dict:
    """A dashboard row as the student may see it: totals over the items their feedback levels show."""
    shown = coursework.student_score(s, row["submission"], row["score"]) if row["score"] else None
    return {**row, "total": shown["total"] if shown else None, "max": shown["max"] if shown else None,
            "score": None}


def counted_marks(s, student, subs) -> tuple[dict[int, str], set[int]]:
    """({submission id: its assignment's policy} for the submission of each assignment that counts for this student,
    {the assignments that count the chosen one}); the rules read once per assignment, not once per row."""
    counted, chooses, seen = {}, set(), set()
    for sub in subs:
        if sub.assignment_id in seen:
            continue
        seen.add(sub.assignment_id)
        policy = rules.rules_for(s, sub.assignment, student).counts
        if policy == "chosen":
            chooses.add(sub.assignment_id)
        mine = rules.counted_submission(s, sub.assignment, student)
        if mine is not None:
            counted[mine.id] = policy
    return counted, chooses


@bp.get("/submissions")
@signed_in("student")
def history():
    """Every submission, the one that counts marked per assignment; with "chosen", a button on each graded one."""
    s = session()
    student = me()
    rows = [history_row(s, r) for r in coursework.submission_rows(s, student_id=student.id)]
    counted, chooses = counted_marks(s, student, [r["submission"] for r in rows])
    return render_template("student/history.html", history=rows, counted=counted, chooses=chooses)


@bp.post("/submissions/<int:submission_id>/choose")
@signed_in("student")
def choose(submission_id):
    """Count this submission (assignments that count the chosen one): refused while it is not graded."""
    s = session()
    sub = own_submission(submission_id)
    if sub.status != "done":
        raise store.Conflict(f"submission {sub.id} is {common.STATUS_TEXT.get(sub.status, sub.status).lower()}; "
                             "you can choose it once it is graded")
    rules.choose(s, sub)
    s.commit()
    flash(f"Submission {sub.id} now counts for {sub.assignment.title or sub.assignment.slug}.", "info")
    return redirect(url_for(".history", _anchor=f"sub-{sub.id}"), 303)


@bp.get("/submissions/<int:submission_id>")
@signed_in("student")
def submission(submission_id):
    s = session()
    sub = own_submission(submission_id)
    rows = coursework.submission_rows(s, student_id=sub.student_id, limit=50)
    student = me()
    shown = rules_view.assignment_rules(s, sub.assignment, student) \
        if rules_view.visible_to_students(sub.assignment) else None
    counted = rules.counted_submission(s, sub.assignment, student)
    view = result_view(s, sub, for_student=True)  # first: it may read the status again (results.py)
    return render_template("student/submission.html", sub=sub, status=status_json(s, sub), rules=shown,
                           counted=counted, view=view, report=coursework.report_of(s, sub),
                           history=[history_row(s, r) for r in rows],
                           poll_s=current_app.config["WEB_POLL_S"],
                           status_url=url_for(".status", submission_id=sub.id))


@bp.get("/submissions/<int:submission_id>/status.json")
@signed_in("student")
def status(submission_id):
    return jsonify(status_json(session(), own_submission(submission_id)))


@bp.get("/submissions/<int:submission_id>/report")
@signed_in("student")
def report(submission_id):
    row = coursework.report_of(session(), own_submission(submission_id))
    if row is None:
        abort(404)
    return report_response(row, inline=False)


@bp.get("/submissions/<int:submission_id>/file")
@signed_in("student")
def file(submission_id):
    return submission_file(own_submission(submission_id))


def report_response(row, inline: bool) -> Response:
    """A stored report; inline for the instructor's viewer, with a CSP sandbox so nothing in it runs as this site."""
    mimetype = "application/pdf" if row.kind == "pdf" else "text/plain"
    disposition = "inline" if inline else "attachment"
    return Response(row.content, mimetype=mimetype, headers={
        "Content-Disposition": content_disposition(row.filename or "report", disposition),
        "Content-Security-Policy": "sandbox; default-src 'none'; object-src 'self'; frame-ancestors 'self'"
        if row.kind != "pdf" else "default-src 'none'; object-src 'self'; frame-ancestors 'self'",
    })
