"""Feedback visibility in the JSON API (instructor tokens): each rubric item's and category's level, set and cleared.

Registered on the API blueprint of routes.py; the levels themselves are grader/app/visibility.py's.
"""
from flask import jsonify

from .. import store, visibility
from ..db import session
from ..models import FEEDBACK_LEVELS
from .routes import INSTRUCTOR, bp, body, iso, require


def rules_json(s, assignment) -> dict:
    rows = [{**row, "switch_at": iso(row["switch_at"])} for row in visibility.rule_rows(s, assignment)]
    return {"assignment": assignment.slug, "levels": list(FEEDBACK_LEVELS), "items": rows}


@bp.get("/assignments/<slug>/feedback")
@require(INSTRUCTOR)
def get_feedback(slug):
    """Every category and item of the assignment's rubric: its default level, its rule and its level now."""
    s = session()
    return jsonify(rules_json(s, store.get_assignment(s, slug)))


@bp.put("/assignments/<slug>/feedback/<key>")
@require(INSTRUCTOR)
def set_feedback(slug, key):
    """{"level", "later_level", "switch_at"}: what students see of item or category `key` now, and from when on
    (ISO 8601, or "due" for the assignment's due date) what they see later."""
    s = session()
    assignment = store.get_assignment(s, slug)
    data = body()
    visibility.set_rule(s, assignment, key, data.get("level"), data.get("later_level"), data.get("switch_at"))
    s.commit()
    return jsonify(rules_json(s, assignment))


@bp.delete("/assignments/<slug>/feedback/<key>")
@require(INSTRUCTOR)
def clear_feedback(slug, key):
    """Back to the rubric's default for `key` (visible: full, hidden: hidden)."""
    s = session()
    assignment = store.get_assignment(s, slug)
    if not visibility.clear_rule(s, assignment, key):
        raise store.NotFound(f"{key!r} has no feedback rule on {slug}")
    s.commit()
    return jsonify(rules_json(s, assignment))


def openapi_paths() -> dict:
    """These routes in the OpenAPI document (openapi.py adds them)."""
    from .openapi import SLUG, errors, json_body, ok, op, path_param
    levels = {"type": "string", "enum": list(FEEDBACK_LEVELS)}
    row = {"type": "object", "properties": {
        "key": {"type": "string"}, "title": {"type": "string"}, "kind": {"enum": ["category", "item"]},
        "check": {"type": ["string", "null"]}, "category": {"type": ["string", "null"]}, "points": {"type": "number"},
        "default": levels, "level": {"type": ["string", "null"]}, "later_level": {"type": ["string", "null"]},
        "switch_at": {"type": ["string", "null"], "format": "date-time"},
        "switch_at_due": {"type": "boolean", "description": "switch_at follows the assignment's due date"},
        "effective": levels}}
    answer = ok({"type": "object", "properties": {"assignment": {"type": "string"},
                                                   "levels": {"type": "array", "items": levels},
                                                   "items": {"type": "array", "items": row}}})
    rule = json_body({"type": "object", "required": ["level"], "properties": {
        "level": levels, "later_level": {"type": ["string", "null"], "enum": [*FEEDBACK_LEVELS, None]},
        "switch_at": {"type": ["string", "null"], "description": 'ISO 8601 with a zone, or "due": the '
                                                                 "assignment's due date"}}})
    key = path_param("key")
    return {
        "/api/v1/assignments/{slug}/feedback": {"get": op(
            "assignments", "What students see of each rubric item and category: hidden, points, summary or full",
            {**answer, **errors(401, 403, 404)}, [SLUG], role="instructor")},
        "/api/v1/assignments/{slug}/feedback/{key}": {
            "put": op("assignments", "Set an item's or category's level now, and optionally a later level from a date",
                      {**answer, **errors(400, 401, 403, 404)}, [SLUG, key], rule, role="instructor"),
            "delete": op("assignments", "Back to the rubric's default level (visible: full, hidden: hidden)",
                         {**answer, **errors(401, 403, 404)}, [SLUG, key], role="instructor")},
    }
