"""The API of grading by hand: the manual-grading queue, who grades which submission, and comments on lines."""
from flask import g, jsonify, request, url_for

from .. import grading, store
from ..db import session
from .routes import INSTRUCTOR, bp, body, iso, require, visible_submission


def entry_json(e: grading.Entry) -> dict:
    sub = e.submission
    return {"submission": sub.id, "student": e.student.username, "name": e.student.name, "status": sub.status,
            "submitted_at": iso(sub.created_at), "grader": e.grader.username if e.grader else None,
            "items": e.items, "left": len(e.left), "left_items": e.left, "total": e.total, "max": e.max,
            "links": {"self": url_for("api.get_submission", submission_id=sub.id),
                      "comments": url_for("api.list_comments", submission_id=sub.id)}}


def comment_json(row, by: str) -> dict:
    d = {"id": row.id, "line": row.line, "text": row.text, "created_at": iso(row.created_at)}
    if g.principal.is_instructor:
        d["by"] = by
    return d


@bp.get("/assignments/<slug>/grading")
@require(INSTRUCTOR)
def grading_queue(slug):
    """The counted submissions with manual items: ?show=needs|graded|all&grader=USERNAME|unassigned&student=TEXT."""
    s = session()
    assignment = store.get_assignment(s, slug)
    grader = request.args.get("grader") or None
    if grader == "mine":
        raise store.StoreError("an API token is not an instructor account: name the grader (grader=USERNAME)")
    entries = grading.queue(s, assignment, request.args.get("show", "needs"), grader,
                            request.args.get("student", ""))
    return jsonify([entry_json(e) for e in entries])


@bp.post("/assignments/<slug>/grading/assign")
@require(INSTRUCTOR)
def assign_graders(slug):
    """{"submissions": [ids] | "unassigned", "graders": [usernames] | null}: round robin; null or [] unassigns."""
    data = body()
    s = session()
    assignment = store.get_assignment(s, slug)
    which = data.get("submissions")
    if which is None:
        raise store.StoreError('name the submissions: a list of ids, or "unassigned" for every unassigned one')
    people = data.get("graders")
    if people is not None and (not isinstance(people, list) or not all(isinstance(p, str) for p in people)):
        raise store.StoreError("graders must be a list of instructor usernames (or null to unassign)")
    done = grading.assign(s, assignment, None if which == "unassigned" else which, people)
    s.commit()
    return jsonify({"assigned": {str(k): v for k, v in done.items()}})


@bp.get("/submissions/<int:submission_id>/comments")
@require()
def list_comments(submission_id):
    """The comments on the submission's lines (a student: on their own submission only)."""
    s = session()
    sub = visible_submission(s, submission_id)
    return jsonify([comment_json(row, by) for row, by in grading.comments_of(s, sub)])


@bp.post("/submissions/<int:submission_id>/comments")
@require(INSTRUCTOR)
def add_comment(submission_id):
    """{"line": N, "text": "..."}: a comment on line N of the submitted file."""
    data = body()
    s = session()
    sub = visible_submission(s, submission_id)
    row = grading.add_comment(s, sub, data.get("line"), data.get("text"), None)
    s.commit()
    return jsonify(comment_json(row, "-")), 201


@bp.delete("/submissions/<int:submission_id>/comments/<int:comment_id>")
@require(INSTRUCTOR)
def delete_comment(submission_id, comment_id):
    s = session()
    grading.delete_comment(s, visible_submission(s, submission_id), comment_id)
    s.commit()
    return "", 204


def openapi_paths() -> dict:
    """These routes in the OpenAPI document (openapi.py adds them)."""
    from .openapi import SID, SLUG, errors, json_body, ok, op, path_param, query
    entry = {"type": "object", "properties": {
        "submission": {"type": "integer"}, "student": {"type": "string"}, "name": {"type": "string"},
        "status": {"type": "string"}, "submitted_at": {"type": "string", "format": "date-time"},
        "grader": {"type": ["string", "null"]}, "items": {"type": "integer", "description": "manual items"},
        "left": {"type": "integer", "description": "manual items not graded yet"},
        "left_items": {"type": "array", "items": {"type": "string"}},
        "total": {"type": ["number", "null"]}, "max": {"type": ["number", "null"]}}}
    comment = {"type": "object", "properties": {
        "id": {"type": "integer"}, "line": {"type": "integer"}, "text": {"type": "string"},
        "created_at": {"type": "string", "format": "date-time"},
        "by": {"type": "string", "description": "instructors only: who wrote it ('-': an API token)"}}}
    assign = json_body({"type": "object", "required": ["submissions"], "properties": {
        "submissions": {"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"const": "unassigned"}],
                        "description": 'ids, or "unassigned": every counted submission that needs grading and '
                                       "has no grader"},
        "graders": {"type": ["array", "null"], "items": {"type": "string"},
                    "description": "instructor usernames, round robin in this order; null or []: unassign"}}})
    return {
        "/api/v1/assignments/{slug}/grading": {"get": op(
            "results", "The manual-grading queue: each student's counted submission with manual items left",
            ok({"type": "array", "items": entry}) | errors(400, 401, 403, 404),
            [SLUG, query("show", "needs grading (default), graded, or all", enum=("needs", "graded", "all")),
             query("grader", "an instructor's username, or unassigned"),
             query("student", "part of a roster id or name")], role="instructor")},
        "/api/v1/assignments/{slug}/grading/assign": {"post": op(
            "results", "Give submissions to graders (round robin), or unassign them",
            ok({"type": "object", "properties": {"assigned": {"type": "object"}}}) | errors(400, 401, 403, 404),
            [SLUG], assign, role="instructor")},
        "/api/v1/submissions/{submission_id}/comments": {
            "get": op("results", "Comments on lines of the submitted file (a student: their own)",
                      ok({"type": "array", "items": comment}) | errors(401, 404), [SID]),
            "post": op("results", "Comment on one line of the submitted file",
                       ok(comment, "Created", "201") | errors(400, 401, 403, 404), [SID],
                       json_body({"type": "object", "required": ["line", "text"], "properties": {
                           "line": {"type": "integer", "minimum": 1}, "text": {"type": "string"}}}),
                       role="instructor")},
        "/api/v1/submissions/{submission_id}/comments/{comment_id}": {"delete": op(
            "results", "Delete a comment", {"204": {"description": "Deleted"}} | errors(401, 403, 404),
            [SID, path_param("comment_id", "integer")], role="instructor")},
    }
