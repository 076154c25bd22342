"""The roster in the JSON API (instructor tokens): list, add, import a CSV, deactivate, reactivate, remove, tokens.

Registered on the API blueprint of routes.py. Every way in checks ids and e-mails by grader.roster's rules.
"""
from flask import g, jsonify, request

from ...roster import RosterError, parse_roster
from .. import accounts, store
from ..db import session
from .routes import INSTRUCTOR, bp, body, error, iso, require


def student_json(st) -> dict:
    return {"username": st.username, "name": st.name, "email": st.email, "state": accounts.student_state(st),
            "created_at": iso(st.created_at), "deactivated_at": iso(st.deactivated_at),
            "removed_at": iso(st.removed_at)}


@bp.get("/students")
@require(INSTRUCTOR)
def list_students():
    """The roster: active and deactivated students (?removed=true: removed ones too), each with its state."""
    removed = request.args.get("removed", "").lower() in ("1", "true", "yes")
    return jsonify([student_json(st) for st in accounts.list_students(session(), removed=removed)])


@bp.post("/students")
@require(INSTRUCTOR)
def add_student():
    """One student; a bad username or e-mail is refused (400) naming the problem."""
    data = body()
    s = session()
    st = accounts.add_student(s, data.get("username", ""), data.get("name", ""), data.get("email", ""))
    s.commit()
    return jsonify(student_json(st)), 201


@bp.post("/students/import")
@require(INSTRUCTOR)
def import_students():
    """A roster CSV (the body, or JSON {"csv", "tokens", "reissue"}): all rows or none, every bad row named."""
    if request.mimetype == "application/json":
        data = body()
        text, tokens, reissue = data.get("csv"), bool(data.get("tokens", False)), bool(data.get("reissue", False))
        if not isinstance(text, str):
            raise store.StoreError("send the roster as JSON {\"csv\": \"username,name,email\\n...\"} or as the body")
    else:
        text = request.get_data(as_text=True)
        tokens = request.args.get("tokens", "").lower() in ("1", "true", "yes")
        reissue = request.args.get("reissue", "").lower() in ("1", "true", "yes")
    try:
        rows = parse_roster(text)
    except RosterError as exc:
        return error(400, "bad_roster", str(exc), problems=exc.problems)
    s = session()
    imported = accounts.import_roster(s, rows, tokens=tokens, reissue=reissue)
    s.commit()
    return jsonify({"added": sum(r["new"] for r in imported), "students": imported}), 200


@bp.get("/students/<username>")
@require(INSTRUCTOR)
def get_student(username):
    return jsonify(student_json(accounts.get_student(session(), username)))


def changed(fn, username: str, **extra):
    s = session()
    st = fn(s, username)
    s.commit()
    return jsonify({**student_json(st), **extra})


@bp.post("/students/<username>/deactivate")
@require(INSTRUCTOR)
def deactivate_student(username):
    """No sign-in or upload until reactivated; still on the roster and the gradebook."""
    return changed(accounts.deactivate_student, username)


@bp.post("/students/<username>/reactivate")
@require(INSTRUCTOR)
def reactivate_student(username):
    """Undo a deactivation or a removal (a removed student's tokens stay revoked: rotate one); "was": the state before."""
    was = accounts.student_state(accounts.get_student(session(), username))
    return changed(accounts.reactivate_student, username, was=was)


@bp.post("/students/<username>/remove")
@require(INSTRUCTOR)
def remove_student(username):
    """Off the roster and the gradebook, tokens revoked; the submissions are kept."""
    s = session()
    st, revoked = accounts.remove_student(s, username)
    s.commit()
    return jsonify({**student_json(st), "tokens_revoked": revoked})


@bp.post("/students/<username>/tokens")
@require(INSTRUCTOR)
def student_token(username):
    """A new token for the student (their other tokens stay valid); the plain text appears in this response only."""
    s = session()
    student = accounts.get_student(s, username)  # a removed student gets none (409: accounts.issue_token)
    label = (request.get_json(silent=True) or {}).get("label", "")
    row, plain = accounts.issue_token(s, "student", student, label=label)
    s.commit()
    return jsonify({"token": plain, "id": row.id, "student": username}), 201


@bp.post("/students/<username>/rotate-token")
@require(INSTRUCTOR)
def rotate_token(username):
    """Revoke the student's tokens and issue one new one, shown in this response only."""
    s = session()
    row, plain, revoked = accounts.rotate_token(s, username, label=f"rotated by token {g.principal.token_id}")
    s.commit()
    return jsonify({"token": plain, "id": row.id, "student": username, "tokens_revoked": revoked}), 201
