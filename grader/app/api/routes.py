"""The JSON API under /api/v1: everything the pages and the CLI do, authenticated by bearer token."""
import math
from functools import wraps

from flask import Blueprint, Response, current_app, g, jsonify, request, url_for
from sqlalchemy import text

from ...source import MAX_BYTES, Rejected
from .. import accounts, coursework, scoring, status_cache, store, visibility
from ...registry import check_ids
from ..db import session
from ..files import content_disposition, submission_file
from ..models import Submission
from ..queue import commit_and_send
from .openapi import document

bp = Blueprint("api", __name__, url_prefix="/api/v1")
INSTRUCTOR = "instructor"


# ---------------------------------------------------------------- tokens and errors

class AuthError(Exception):
    """No valid token (401), or a token of the wrong role or student (403)."""
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def require(*roles):
    """View decorator: a valid token (of one of `roles`, when given); sets g.principal."""
    def decorate(view):
        @wraps(view)
        def wrapper(*args, **kwargs):
            plain = bearer_token()
            if plain is None:
                raise AuthError(401, "missing token: send 'Authorization: Bearer <token>'")
            principal = accounts.authenticate(session(), plain)
            if principal is None:
                raise AuthError(401, "unknown or revoked token")
            if roles and principal.role not in roles:
                raise AuthError(403, f"this needs a {' or '.join(roles)} token")
            g.principal = principal
            return view(*args, **kwargs)
        return wrapper
    return decorate


def error(http_status: int, code: str, message: str, **extra):
    """A JSON error body with a machine code and a message for people."""
    return jsonify({"error": code, "message": message, **extra}), http_status


@bp.errorhandler(AuthError)
def _auth_error(exc: AuthError):
    response, status = error(exc.status, "unauthorized" if exc.status == 401 else "forbidden", exc.message)
    if exc.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="grader"'
    return response, status


@bp.errorhandler(store.StoreError)
def _store_error(exc: store.StoreError):
    code = {403: "forbidden", 404: "not_found", 409: "conflict", 429: "too_many",
            503: "unavailable"}.get(exc.status, "bad_request")
    return error(exc.status, code, exc.message)


# ---------------------------------------------------------------- serialisation

def iso(dt) -> str | None:
    return dt.isoformat(timespec="seconds") + "Z" if dt else None


def assignment_json(a) -> dict:
    d = {"slug": a.slug, "title": a.title, "track": a.track, "checks": list(a.checks or []) or list(check_ids()),
         "limits": a.limits or {}, "created_at": iso(a.created_at)}
    if g.principal.is_instructor:
        d["seed"] = a.seed  # the seed is never shown to students
    else:  # nor a check whose every rubric item is hidden from them (visibility.py)
        vis = visibility.levels(session(), a)
        d["checks"] = [cid for cid in d["checks"] if vis.check(cid) != "hidden"]
    from .assignments import rules_json  # the course rules (issue 17): api/assignments.py
    d.update(rules_json(session(), a))
    return d


def submission_json(s, sub: Submission) -> dict:
    d = {"id": sub.id, "assignment": sub.assignment.slug, "student": sub.student.username, "filename": sub.filename,
         "sha256": sub.sha256, "size": sub.size, "track": sub.track, "status": sub.status, "request": sub.request,
         "attempts": sub.attempts, "same_as": sub.same_as, "created_at": iso(sub.created_at),
         "started_at": iso(sub.started_at), "finished_at": iso(sub.finished_at),
         "queue_position": store.queue_position(s, sub), "progress": progress(sub),
         "links": {"self": url_for("api.get_submission", submission_id=sub.id),
                   "result": url_for("api.get_result", submission_id=sub.id),
                   "file": url_for("api.get_file", submission_id=sub.id)}}
    if g.principal.is_instructor:
        d.update(error=sub.error, worker=sub.worker, heartbeat_at=iso(sub.heartbeat_at), manual=sub.manual)
    elif d["progress"] is not None:  # a check the student cannot read is not named as the one running
        d["progress"] = visibility.student_progress(d["progress"], list(sub.assignment.checks or []) or
                                                    list(check_ids()), visibility.levels(s, sub.assignment))
    if not g.principal.is_instructor and sub.status == "failed":
        d["message"] = "grading could not be completed on our side; your instructor can see why and regrade it"
    return d


def progress(sub: Submission) -> dict | None:
    """While running: the check in progress and its place among the assignment's checks."""
    if sub.status != "running":
        return None
    checks = list(sub.assignment.checks or []) or list(check_ids())
    current = sub.current_check
    return {"check": current, "index": checks.index(current) + 1 if current in checks else None, "of": len(checks),
            "phase": "checking" if current else "starting the sandbox"}


def result_json(s, sub: Submission, result) -> dict:
    """A result with its score; for a student without the seed, and scores as the student may see them."""
    instructor = g.principal.is_instructor
    # A student reads each item and check only as far as its feedback level allows (visibility.py)
    vis = None if instructor else visibility.levels(s, sub.assignment)
    report = dict(result.report) if instructor else visibility.student_report(result.report, vis)
    row = coursework.score_of(s, result)
    scored = row.score if row else None
    if not instructor:
        scored = coursework.student_score(s, sub, scored, vis)
    d = {"submission": sub.id, "request": result.request, "created_at": iso(result.created_at),
         "grader_version": result.grader_version, "report": report, "score": scored,
         "rubric_version": row.rubric_version if row else None}
    previous = coursework.previous_score(s, sub, result, for_student=not instructor, vis=vis)
    if previous is not None:
        d["previous"] = {key: previous[key] for key in ("request", "total", "max")}
        d["diff"] = scoring.diff(previous["score"], scored)
    if instructor:
        d["options"] = result.options
        d["attempt"] = result.attempt
    return d


# ---------------------------------------------------------------- access

def visible_submission(s, submission_id: int) -> Submission:
    """The submission if the caller may see it; another student's looks exactly like a missing one."""
    sub = store.find_submission(s, submission_id)
    if sub is None or (not g.principal.is_instructor and sub.student_id != g.principal.student_id):
        raise store.NotFound(f"no submission {submission_id}")
    return sub


def body() -> dict:
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise store.StoreError("send a JSON object (Content-Type: application/json)")
    return data


# ---------------------------------------------------------------- routes

@bp.get("/openapi.json")
def openapi():
    return jsonify(document())


@bp.get("/health")
def health():
    """Liveness: the database answers."""
    session().execute(text("SELECT 1"))
    return jsonify({"status": "ok"})


@bp.get("/me")
@require()
def me():
    p = g.principal
    return jsonify({"role": p.role, "student": p.username})


@bp.get("/assignments")
@require()
def list_assignments():
    """A student's open and closed assignments; an instructor's, archived ones too with ?all=1."""
    everything = request.args.get("all", "").lower() in ("1", "true", "yes")
    return jsonify([assignment_json(a) for a in store.list_assignments(
        session(), for_student=not g.principal.is_instructor, include_archived=everything)])


@bp.post("/assignments")
@require(INSTRUCTOR)
def create_assignment():
    data = body()
    s = session()
    a = store.create_assignment(s, str(data.pop("slug", "") or ""), **data)
    s.commit()
    return jsonify(assignment_json(a)), 201


@bp.get("/assignments/<slug>")
@require()
def get_assignment(slug):
    """With its rules; for a student their own (extension, attempts left); a draft or archived one is 404."""
    s = session()
    a = store.get_assignment(s, slug) if g.principal.is_instructor else store.student_assignment(s, slug)
    return jsonify(assignment_json(a))


@bp.patch("/assignments/<slug>")
@require(INSTRUCTOR)
def update_assignment(slug):
    s = session()
    a = store.update_assignment(s, slug, **body())
    s.commit()
    return jsonify({**assignment_json(a), "rescored": a.rescored})


@bp.post("/assignments/<slug>/submissions")
@require()
def submit(slug):
    """Upload one file (multipart field 'file', or the raw body with ?filename=); validated before it is queued."""
    s = session()
    assignment = store.get_assignment(s, slug)
    student = upload_student(s)
    data, filename = upload_bytes()
    try:
        upload = store.create_submission(
            s, assignment, student, data, filename, archive_dir=current_app.config["SUBMISSIONS_DIR"],
            enforce_attempts=current_app.config["ENFORCE_ATTEMPTS"] and not g.principal.is_instructor,
            enforce_rules=not g.principal.is_instructor)
    except Rejected as exc:
        status = 413 if len(data) > MAX_BYTES else 422
        return error(status, "rejected", f"{filename}: {exc}")
    sub = upload.submission
    commit_and_send(current_app, s, [sub] if upload.created else [])
    d = submission_json(s, sub)
    d["duplicate"] = upload.duplicate
    if not upload.created:
        d["message"] = f"this file is identical to your latest submission ({sub.id}); it was not queued again"
    elif upload.duplicate:
        d["message"] = (f"this file is identical to your earlier submission {sub.same_as}; it is graded again as "
                        "your latest")
    response = jsonify(d)
    response.headers["Location"] = d["links"]["self"]
    return response, 202 if upload.created else 200


def upload_student(s):
    """Students submit for themselves; an instructor names the student (form field or query 'student')."""
    named = request.form.get("student") or request.args.get("student")
    if g.principal.is_instructor:
        if not named:
            raise store.StoreError("an instructor upload names the student: form field or query parameter 'student'")
        return accounts.require_active(accounts.get_student(s, named))  # a deactivated or removed one cannot upload
    if named and named != g.principal.username:
        raise AuthError(403, "a student token can only submit for its own student")
    return accounts.get_student(s, g.principal.username)


def upload_bytes() -> tuple[bytes, str]:
    """The file from a multipart upload or from the raw body."""
    if request.files:
        f = request.files.get("file")
        if f is None:
            raise store.StoreError(f"the upload has no 'file' field (got: {', '.join(request.files)})")
        return f.read(), f.filename or "submission.py"
    if request.mimetype in ("multipart/form-data", "application/x-www-form-urlencoded", "application/json"):
        raise store.StoreError("no file in the upload: send it as multipart field 'file' or as the request body")
    return request.get_data(), request.args.get("filename") or request.headers.get("X-Filename") or "submission.py"


@bp.get("/assignments/<slug>/submissions")
@require()
def list_submissions(slug):
    s = session()
    assignment = store.get_assignment(s, slug) if g.principal.is_instructor else store.student_assignment(s, slug)
    student = None
    if not g.principal.is_instructor:
        student = accounts.get_student(s, g.principal.username)
    elif request.args.get("student"):
        student = accounts.get_student(s, request.args["student"])
    limit = min(count_arg("limit", 1000), 1000)
    subs = store.list_submissions(s, assignment, student, request.args.get("status"), limit, count_arg("offset", 0))
    return jsonify([submission_json(s, sub) for sub in subs])


def count_arg(name: str, default: int) -> int:
    """A paging parameter: a whole number >= 0, else a 400 naming it (a negative LIMIT means 'no limit' in SQLite)."""
    text = request.args.get(name)
    if text is None:
        return default
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise store.StoreError(f"{name} must be a whole number >= 0, not {text[:40]!r}") from None
    if not 0 <= value <= 2**31 - 1:  # beyond a 32-bit integer the database itself would refuse it
        raise store.StoreError(f"{name} must be between 0 and {2**31 - 1}, not {value}")
    return value


@bp.get("/submissions/<int:submission_id>")
def get_submission(submission_id):
    """The status, polled: with an ETag (If-None-Match answers 304) and, until grading ends, when to ask again.
    A token's answer is kept for it until anything it was made from changes (status_cache.py, PostgreSQL)."""
    cache, plain = status_cache.for_app(current_app), bearer_token()
    key = cache.key(plain, submission_id) if cache is not None and plain else None
    kept = cache.get(key) if key else None
    if kept is not None:
        body, headers = kept
        response = current_app.response_class(body, headers=headers)
    else:
        mark = cache.mark() if key else None
        response = status_answer(submission_id)
        if key and response.status_code == 200:
            cache.put(key, mark, response.get_data(), dict(response.headers), g.get("status_queued_at"))
    return response.make_conditional(request)


@require()
def status_answer(submission_id):
    s = session()
    sub = visible_submission(s, submission_id)
    response = jsonify(submission_json(s, sub))
    g.status_queued_at = status_cache.epoch(sub.enqueued_at) if sub.status == "queued" else None  # for the cache
    # Each token sees its own view: only the caller's cache may keep it, and must ask again before reusing it.
    response.headers["Cache-Control"] = "private, no-cache"
    response.vary.add("Authorization")
    if sub.status in ("queued", "running"):
        response.headers["Retry-After"] = str(math.ceil(current_app.config["WEB_POLL_S"]))
    response.add_etag()
    return response


@bp.get("/submissions/<int:submission_id>/file")
@require()
def get_file(submission_id):
    return submission_file(visible_submission(session(), submission_id))


@bp.get("/submissions/<int:submission_id>/result")
@require()
def get_result(submission_id):
    s = session()
    sub = visible_submission(s, submission_id)
    result = store.latest_result(s, sub)
    if result is None and sub.status in ("queued", "running"):
        return jsonify(partial_json(sub, None if g.principal.is_instructor else visibility.levels(s, sub.assignment)))
    if result is None:
        return error(404, "not_graded", f"submission {sub.id} has no result yet (status: {sub.status})",
                     status=sub.status)
    d = result_json(s, sub, result)
    d["current"] = sub.status == "done"  # False while a regrade is queued or running
    d["partial"] = False
    return jsonify(d)


def partial_verdicts(sub: Submission, vis=None) -> list[dict]:
    """The checks the judge has decided so far for the running attempt, in the assignment's order. A student (vis:
    the assignment's feedback levels) reads them as in the final report, each only as far as its level allows."""
    checks = list(sub.assignment.checks or []) or list(check_ids())
    found = {c.get("id"): c for c in sub.partial or [] if isinstance(c, dict)}
    verdicts = [found[cid] for cid in checks if cid in found]
    return verdicts if vis is None else visibility.student_checks(verdicts, vis)


def partial_json(sub: Submission, vis=None) -> dict:
    """A submission still queued or running: the verdicts decided so far, no score until the result is stored.
    vis: a student's feedback levels (a check they cannot read is neither listed, pending nor named as running)."""
    checks = partial_verdicts(sub, vis)
    done = {c["id"] for c in checks}
    every = list(sub.assignment.checks or []) or list(check_ids())
    readable = every if vis is None else [cid for cid in every if visibility.readable(vis, cid)]
    running = progress(sub) if vis is None else visibility.student_progress(progress(sub), every, vis)
    return {"submission": sub.id, "request": sub.request, "partial": True, "current": False, "status": sub.status,
            "progress": running, "report": {"checks": checks}, "score": None,
            "pending": [cid for cid in readable if cid not in done],
            "message": f"submission {sub.id} is {sub.status}: the checks decided so far; the score comes with the "
                       "result"}


@bp.get("/submissions/<int:submission_id>/results")
@require()
def list_results(submission_id):
    s = session()
    sub = visible_submission(s, submission_id)
    return jsonify([result_json(s, sub, r) for r in store.results_of(s, sub)])


@bp.get("/submissions/<int:submission_id>/attempts")
@require(INSTRUCTOR)
def list_attempts(submission_id):
    s = session()
    sub = visible_submission(s, submission_id)
    return jsonify([{"request": a.request, "number": a.number, "worker": a.worker, "task_id": a.task_id,
                     "started_at": iso(a.started_at), "finished_at": iso(a.finished_at), "outcome": a.outcome,
                     "message": a.message} for a in store.attempts_of(s, sub)])


@bp.post("/submissions/<int:submission_id>/regrade")
@require(INSTRUCTOR)
def regrade(submission_id):
    s = session()
    sub = store.request_regrade(s, visible_submission(s, submission_id))
    commit_and_send(current_app, s, [sub])
    return jsonify(submission_json(s, sub)), 202


@bp.post("/assignments/<slug>/regrade")
@require(INSTRUCTOR)
def regrade_assignment(slug):
    """{"which": "counted"|"all", "confirm": bool}: without confirm, how many it would regrade (nothing is queued);
    with it, regrade them. Submissions already queued or running are skipped either way."""
    s = session()
    data = request.get_json(silent=True) or {}
    if not isinstance(data, dict):
        raise store.StoreError('send a JSON object {"which": "counted" or "all", "confirm": true or false}')
    which, confirm = data.get("which", "counted"), data.get("confirm", False)
    if not isinstance(confirm, bool):
        raise store.StoreError(f"confirm must be true or false, not {confirm!r}")
    plan = store.regrade_plan(s, store.get_assignment(s, slug), which)
    answer = {"which": plan.which, "confirm": confirm, "count": len(plan.regrade),
              "submissions": [sub.id for sub in plan.regrade],
              "skipped": {"count": len(plan.skipped), "submissions": [sub.id for sub in plan.skipped],
                          "reason": "already queued or running"}}
    if not confirm:
        answer["message"] = (f"would regrade {len(plan.regrade)} {'counted ' if which == 'counted' else ''}"
                             f"submission{'s' * (len(plan.regrade) != 1)} of {slug}; send confirm: true to do it")
        return jsonify(answer)
    subs = store.run_regrade(s, plan)
    commit_and_send(current_app, s, subs)
    return jsonify({**answer, "queued": [sub.id for sub in subs]}), 202


@bp.put("/submissions/<int:submission_id>/manual")
@require(INSTRUCTOR)
def set_manual(submission_id):
    s = session()
    sub = visible_submission(s, submission_id)
    row = coursework.set_manual(s, sub, body())
    s.commit()
    return jsonify({"submission": sub.id, "manual": sub.manual, "score": row.score if row else None})


@bp.post("/rescore")
@require(INSTRUCTOR)
def rescore():
    """Recompute scores from stored results with the current rubric; no student code runs."""
    s = session()
    data = request.get_json(silent=True) or {}
    assignment = store.get_assignment(s, data["assignment"]) if data.get("assignment") else None
    summary = coursework.rescore(s, assignment)
    s.commit()
    return jsonify(summary)


@bp.get("/assignments/<slug>/export")
@require(INSTRUCTOR)
def export(slug):
    """One row per student on the roster: who, the submission that counts, its score and late penalty."""
    from ..export import gradebook_rows
    s = session()
    rows = gradebook_rows(s, store.get_assignment(s, slug))
    if request.args.get("format", "json") == "csv":
        from rubric import gradebook_csv
        return Response(gradebook_csv(rows), mimetype="text/csv",
                        headers={"Content-Disposition": content_disposition(f"{slug}.csv")})
    return jsonify([{**r, "submitted_at": iso(r["submitted_at"])} for r in rows])


# The roster's routes (/students...) are in roster.py, on this blueprint.


@bp.get("/queue")
@require(INSTRUCTOR)
def queue():
    """How many submissions are in each state, and what is running now."""
    s = session()
    running = store.list_submissions(s, status="running", limit=100)
    return jsonify({"counts": store.queue_counts(s),
                    "running": [{"id": sub.id, "check": sub.current_check, "worker": sub.worker,
                                 "started_at": iso(sub.started_at)} for sub in running]})
