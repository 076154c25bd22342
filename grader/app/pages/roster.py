"""The instructor's roster page: import a CSV (every bad row named, nothing imported), each student's state, and
deactivate, reactivate, remove (after a confirmation page) and rotate a token, the new token shown once.

On the instructor blueprint of instructor.py; the same accounts functions serve the API and `grader roster`.
"""
import csv
import io

from flask import Response, flash, redirect, render_template, request, url_for

from ...roster import RosterError, parse_roster
from .. import accounts, store
from ..db import session
from ..models import Submission
from .common import signed_in
from .instructor import bp

ROSTER_MAX_BYTES = 1 << 20


def roster_page(status: int = 200, **shown):
    """The page: the import form and the students (removed ones only with ?removed=1), plus what was just done."""
    s = session()
    with_removed = request.args.get("removed") == "1"
    students = accounts.list_students(s, removed=with_removed)
    context = {"students": students, "with_removed": with_removed, "state": accounts.student_state,
               "issued": None, "error": None, "problems": [], "rotated": None, **shown}
    return render_template("instructor/roster.html", **context), status


def capitalised(message: str) -> str:
    return message[0].upper() + message[1:].rstrip(".") + "."


@bp.get("/roster")
@signed_in("instructor")
def roster():
    return roster_page()


@bp.post("/roster")
@signed_in("instructor")
def roster_import():
    """Add the students of a CSV and show each new token once (or send them back as a CSV download)."""
    s = session()
    upload = request.files.get("roster")
    text = request.form.get("text", "")
    if upload is not None and upload.filename:
        data = upload.read(ROSTER_MAX_BYTES + 1)
        if len(data) > ROSTER_MAX_BYTES:
            error = "The roster file is larger than 1 MiB."
        else:
            try:
                text, error = data.decode("utf-8-sig"), None
            except UnicodeDecodeError:
                error = "The roster file is not UTF-8 text."
    else:
        error = None if text.strip() else "Choose a CSV file (or paste its text) with a header row: username,name,email."
    problems = []
    if error is None:
        try:
            issued = accounts.import_roster(s, parse_roster(text), reissue=bool(request.form.get("reissue")))
        except RosterError as exc:
            problems = exc.problems
            error = ("Nothing was imported: this row needs fixing." if len(problems) == 1 else
                     f"Nothing was imported: {len(problems)} problems need fixing.")
        except store.StoreError as exc:
            s.rollback()
            error = capitalised(exc.message)
    if error is not None:
        return roster_page(422, error=error, problems=problems)
    s.commit()
    if request.form.get("as") == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["username", "name", "token"])
        from rubric.export import text_cell
        for row in issued:
            if row["token"]:
                writer.writerow([text_cell(row["username"]), text_cell(row["name"]), row["token"]])
        return Response(out.getvalue(), mimetype="text/csv",
                        headers={"Content-Disposition": 'attachment; filename="tokens.csv"'})
    return roster_page(issued=issued)


# ---------------------------------------------------------------- one student

def back(message: str):
    flash(message, "info")
    return redirect(url_for(".roster"), 303)


@bp.post("/roster/<username>/deactivate")
@signed_in("instructor")
def roster_deactivate(username):
    s = session()
    accounts.deactivate_student(s, username)
    s.commit()
    return back(f"{username} is deactivated: they cannot sign in or upload, and stay on the roster and gradebook.")


@bp.post("/roster/<username>/reactivate")
@signed_in("instructor")
def roster_reactivate(username):
    s = session()
    was = accounts.student_state(accounts.get_student(s, username))
    accounts.reactivate_student(s, username)
    s.commit()
    if was == "removed":
        return back(f"{username} is back on the roster. Their old tokens stay revoked: rotate their token to give "
                    "them a new one.")
    return back(f"{username} is active again: their token works again.")


@bp.get("/roster/<username>/remove")
@signed_in("instructor")
def roster_remove_confirm(username):
    """Ask first: removing takes the student off the roster and the gradebook and revokes their tokens."""
    s = session()
    student = accounts.get_student(s, username)
    submissions = s.query(Submission).filter(Submission.student_id == student.id).count()
    return render_template("instructor/roster_remove.html", student=student, submissions=submissions)


@bp.post("/roster/<username>/remove")
@signed_in("instructor")
def roster_remove(username):
    s = session()
    _, revoked = accounts.remove_student(s, username)
    s.commit()
    return back(f"{username} is removed from the roster and the gradebook; {revoked} token"
                f"{'s' * (revoked != 1)} revoked. Their submissions are kept.")


@bp.post("/roster/<username>/rotate-token")
@signed_in("instructor")
def roster_rotate(username):
    """A new token shown on this page once; the student's earlier tokens stop working."""
    s = session()
    _, plain, revoked = accounts.rotate_token(s, username, label="rotated on the roster page")
    student = accounts.get_student(s, username)
    s.commit()
    return roster_page(rotated={"username": username, "name": student.name, "token": plain, "revoked": revoked,
                                "state": accounts.student_state(student)})
