"""The assignment rules in the JSON API: what a student is told of an assignment's rules (dates, late policy,
attempts, which submission counts), per-student extensions, stored rubric versions, and a student's choice of
the submission that counts. Routes on the same blueprint as routes.py."""
from flask import current_app, g, jsonify, request

from .. import accounts, extensions, rubrics, rules, rules_text, store
from ..db import session
from ..models import utcnow
from .routes import INSTRUCTOR, bp, body, iso, require, submission_json, visible_submission


def when(dt) -> str | None:
    """An aware UTC datetime as the API writes times (…Z)."""
    return iso(rules.naive(dt))


def rules_json(s, a) -> dict:
    """The assignment's rules: for a student their own (extension, attempts left, what an upload now would lose);
    for an instructor the class's, the overrides set on the assignment and the pinned rubric."""
    student = None if g.principal.is_instructor else accounts.get_student(s, g.principal.username)
    r = rules.rules_for(s, a, student)
    d = {"state": r.state, "opens_at": when(r.opens_at), "due_at": when(r.due_at),
         "late_policy": {"grace_minutes": r.grace_minutes, "per_day": r.late_per_day, "max": r.late_max},
         "counts": r.counts, "attempts_per_period": r.attempts or None, "period": r.period, "timezone": r.timezone,
         "rubric_version": r.rubric.version if r.rubric is not None else None}
    if student is not None:
        now = utcnow()
        attempts = rules.attempts_status(s, a, student, now, r)
        d.update(extended_until=when(r.extended_until), extra_attempts=r.extra_attempts,
                 attempts_left=attempts["left"], attempts_used=attempts["used"],
                 attempts_reset_at=when(attempts["resets_at"]) if r.attempts else None,
                 late_fraction_now=rules.late_fraction(r, now))
        refusal = rules.upload_refusal(r, now)
        # the sentences the submit page shows (rules_text), so the API and the pages never disagree
        shown = attempts if current_app.config["ENFORCE_ATTEMPTS"] else None
        d["in_words"] = rules_text.describe(r, shown, now)
        d["late_notice"] = rules_text.late_notice(r, d["late_fraction_now"], now)
        d["accepting_uploads"] = refusal is None
        if refusal is not None:
            d["why_not"] = refusal[1]
    else:
        d["in_words"] = rules_text.describe(r, None, utcnow())  # as a student without an extension reads them
        d.update(rules=dict(a.rules or {}), rubric=rubrics.rubric_json(rubrics.get_rubric_version(s, a.rubric_id))
                 if a.rubric_id is not None else None,
                 extensions=len(extensions.list_extensions(s, a)))
    return d


def extension_json(ext, username: str) -> dict:
    return {"student": username, "due_at": iso(ext.due_at), "extra_attempts": ext.extra_attempts,
            "reason": ext.reason, "created_at": iso(ext.created_at)}


@bp.get("/assignments/<slug>/extensions")
@require(INSTRUCTOR)
def list_extensions(slug):
    s = session()
    a = store.get_assignment(s, slug)
    return jsonify([extension_json(ext, name) for ext, name in extensions.list_extensions(s, a)])


@bp.put("/assignments/<slug>/extensions/<username>")
@require(INSTRUCTOR)
def put_extension(slug, username):
    """Give (or change) one student's extension: {"due_at": ISO with zone or null, "extra_attempts": n, "reason"}."""
    s = session()
    a = store.get_assignment(s, slug)
    data = body()
    unknown = sorted(set(data) - {"due_at", "extra_attempts", "reason"})
    if unknown:
        raise store.StoreError(f"unknown extension field {', '.join(unknown)}; known: due_at, extra_attempts, reason")
    ext, rescored = extensions.set_extension(s, a, accounts.get_student(s, username), **data)
    s.commit()
    return jsonify({**extension_json(ext, username), "rescored": rescored})


@bp.delete("/assignments/<slug>/extensions/<username>")
@require(INSTRUCTOR)
def delete_extension(slug, username):
    s = session()
    a = store.get_assignment(s, slug)
    rescored = extensions.remove_extension(s, a, accounts.get_student(s, username))
    s.commit()
    return jsonify({"student": username, "removed": True, "rescored": rescored})


@bp.get("/rubrics")
@require(INSTRUCTOR)
def list_rubrics():
    return jsonify([rubrics.rubric_json(row) for row in rubrics.list_rubric_versions(session())])


@bp.post("/rubrics")
@require(INSTRUCTOR)
def upload_rubric():
    """Validate and store a rubric file (TOML text as the body, or {"rubric": text, "filename"}); the same text is
    the version already stored (200), a new one 201."""
    s = session()
    if request.is_json:
        data = body()
        text, filename = data.get("rubric"), str(data.get("filename") or "")
    else:
        text, filename = request.get_data(as_text=False), request.args.get("filename", "")
    if not text:
        raise store.StoreError('no rubric: send the TOML text as the body or as {"rubric": "..."}')
    known = len(rubrics.list_rubric_versions(s))
    row = rubrics.store_rubric(s, text, filename, None)
    s.commit()
    return jsonify(rubrics.rubric_json(row)), 201 if len(rubrics.list_rubric_versions(s)) > known else 200


@bp.post("/submissions/<int:submission_id>/choose")
@require()
def choose_submission(submission_id):
    """A student marks their own submission as the one that counts (assignments that count the chosen one)."""
    s = session()
    sub = visible_submission(s, submission_id)
    if g.principal.is_instructor:
        raise store.StoreError("only the student chooses which of their submissions counts", 403)
    store.student_assignment(s, sub.assignment.slug)  # a draft or archived assignment is not theirs to change
    rules.choose(s, sub)
    s.commit()
    d = submission_json(s, sub)
    d["chosen_at"] = iso(sub.chosen_at)
    return jsonify(d)
