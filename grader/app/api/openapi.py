"""The OpenAPI 3.1 document for /api/v1, served at /api/v1/openapi.json (a test keeps it in step with the routes)."""
from ... import __version__

TAGS = ("submissions", "results", "assignments", "roster", "operations")


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def ok(schema: dict, description: str = "OK", status: str = "200") -> dict:
    return {status: {"description": description, "content": {"application/json": {"schema": schema}}}}


def errors(*codes) -> dict:
    text = {400: "Bad request", 401: "Missing, unknown or revoked token", 403: "The token's role may not do this, or its student is deactivated or removed",
            404: "Not found (another student's submission looks the same)", 409: "Conflict with the current state",
            413: "The file is too large", 422: "The file was refused; the message names the problem",
            503: "A dependency is unavailable"}
    return {str(c): {"description": text[c], "content": {"application/json": {"schema": ref("Error")}}}
            for c in codes}


def op(tag: str, summary: str, responses: dict, params=(), body: dict | None = None, public=False,
       role: str | None = None) -> dict:
    d = {"tags": [tag], "summary": summary + (f" ({role} token)" if role else ""), "responses": responses}
    if params:
        d["parameters"] = list(params)
    if body:
        d["requestBody"] = body
    if public:
        d["security"] = []
    return d


def path_param(name: str, kind: str = "string") -> dict:
    return {"name": name, "in": "path", "required": True, "schema": {"type": kind}}


def query(name: str, description: str, kind: str = "string", enum=None) -> dict:
    schema = {"type": kind} | ({"enum": list(enum)} if enum else {})
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


def json_body(schema: dict, required=True) -> dict:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


SID = path_param("submission_id", "integer")
SLUG = path_param("slug")
IF_NONE_MATCH = {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"},
                 "description": "the ETag of the status last seen"}
NOT_MODIFIED = {"304": {"description": "Not modified: If-None-Match names the current ETag"}}
DT = {"type": ["string", "null"], "format": "date-time"}
TOKEN = {"type": "object", "properties": {"token": {"type": "string"}, "id": {"type": "integer"},
                                          "student": {"type": "string"}}}


NUM = {"type": ["number", "null"]}
# An assignment's rules as the API answers them (api/assignments.py rules_json).
RULES_OUT = {
    "state": {"type": "string", "enum": ["draft", "open", "closed", "archived"]},
    "opens_at": DT, "due_at": {**DT, "description": "the assignment's, or its rubric policy's deadline"},
    "late_policy": {"type": "object", "properties": {"grace_minutes": {"type": "number"},
                                                     "per_day": {"type": "number"}, "max": {"type": "number"}}},
    "counts": {"type": "string", "enum": ["best", "latest", "chosen"]},
    "attempts_per_period": {"type": ["integer", "null"], "description": "null: unlimited (a student's includes "
                                                                        "their extra attempts)"},
    "period": {"type": "string", "enum": ["day", "week", "term"]}, "timezone": {"type": "string"},
    "rubric_version": {"type": ["string", "null"]},
    "extended_until": {**DT, "description": "students: their extension's due date, or null"},
    "extra_attempts": {"type": "integer", "description": "students: their extension's extra attempts per period"},
    "attempts_left": {"type": ["integer", "null"], "description": "students: null = unlimited"},
    "attempts_used": {"type": "integer", "description": "students: this period"},
    "attempts_reset_at": {**DT, "description": "students: when the period's count resets (null: per term)"},
    "late_fraction_now": {"type": "number", "description": "students: what an upload now would lose (0..max)"},
    "accepting_uploads": {"type": "boolean", "description": "students"},
    "why_not": {"type": "string", "description": "students: why uploads are refused now"},
    "in_words": {"type": "array", "items": {"type": "string"},
                 "description": "the rules in sentences, as the submit page shows them (grader/app/rules_text.py)"},
    "late_notice": {"type": ["string", "null"], "description": "students: what an upload now costs, in words "
                                                               "(null: on time)"},
    "rules": {"type": "object", "description": "instructors: the overrides set on the assignment"},
    "rubric": {"type": ["object", "null"], "description": "instructors: the pinned rubric (null: the packaged one)"},
    "extensions": {"type": "integer", "description": "instructors: how many students have one"},
    "rescored": {"type": ["integer", "null"], "description": "PATCH: results rescored by the change"}}
RULES_IN = {
    "state": {"type": "string", "enum": ["draft", "open", "closed", "archived"]},
    "opens_at": {**DT, "description": "ISO 8601 with its zone (Z or +hh:mm); a time without one is refused"},
    "due_at": {**DT, "description": "ISO 8601 with its zone; null: the rubric policy's deadline"},
    "rubric": {"type": ["string", "null"], "description": "a rubric file's TOML text (validated, stored, pinned); "
                                                          "null: the packaged rubric"},
    "rubric_filename": {"type": "string"}, "rubric_id": {"type": ["integer", "null"], "description": "a stored rubric"},
    "grace_minutes": NUM, "late_penalty_per_day": NUM, "late_penalty_max": NUM,
    "attempts_per_period": {"type": ["integer", "null"]}, "period": {"type": ["string", "null"]},
    "timezone": {"type": ["string", "null"]}, "counts": {"type": ["string", "null"],
                                                         "enum": ["best", "latest", "chosen", None]},
    "rules": {"type": "object", "description": "the same overrides as one object; null removes one (the rubric's)"}}


def schemas() -> dict:
    return {
        "Error": {"type": "object", "required": ["error", "message"],
                  "properties": {"error": {"type": "string", "examples": ["rejected"]},
                                 "message": {"type": "string"}}},
        "Assignment": {"type": "object", "properties": {
            "slug": {"type": "string"}, "title": {"type": "string"},
            "track": {"type": ["string", "null"], "enum": ["reverse", "lm", None]},
            "checks": {"type": "array", "items": {"type": "string"}, "description": "check ids graded"},
            "limits": {"type": "object", "description": "sandbox limits (grader.sandbox.Limits fields)"},
            "seed": {"type": ["integer", "null"], "description": "instructors only; null: the judge's default"},
            "created_at": DT, **RULES_OUT}},
        "AssignmentInput": {"type": "object", "properties": {
            "slug": {"type": "string"}, "title": {"type": "string"}, "track": {"type": ["string", "null"]},
            "checks": {"type": "array", "items": {"type": "string"}}, "seed": {"type": ["integer", "null"]},
            "limits": {"type": "object"}, **RULES_IN}},
        "Extension": {"type": "object", "properties": {
            "student": {"type": "string"}, "due_at": DT, "extra_attempts": {"type": "integer"},
            "reason": {"type": "string"}, "created_at": DT,
            "rescored": {"type": "integer", "description": "results rescored (late penalties follow the extension)"}}},
        "Rubric": {"type": "object", "description": "a stored rubric version (the same text is one row)",
                   "properties": {"id": {"type": "integer"}, "version": {"type": "string"},
                                  "digest": {"type": "string"}, "title": {"type": "string"},
                                  "filename": {"type": "string"}, "created_at": DT}},
        "Progress": {"type": ["object", "null"], "properties": {
            "check": {"type": ["string", "null"]}, "index": {"type": ["integer", "null"]}, "of": {"type": "integer"},
            "phase": {"type": "string"}}},
        "Submission": {"type": "object", "properties": {
            "id": {"type": "integer"}, "assignment": {"type": "string"}, "student": {"type": "string"},
            "filename": {"type": "string"}, "sha256": {"type": "string"}, "size": {"type": "integer"},
            "track": {"type": ["string", "null"]},
            "status": {"type": "string", "enum": ["queued", "running", "done", "failed"]},
            "request": {"type": "integer", "description": "grading request: 1, plus one per regrade"},
            "attempts": {"type": "integer"}, "same_as": {"type": ["integer", "null"]},
            "queue_position": {"type": ["integer", "null"], "description": "1 = next; null unless queued"},
            "progress": ref("Progress"), "duplicate": {"type": "boolean"}, "message": {"type": "string"},
            "created_at": DT, "started_at": DT, "finished_at": DT,
            "links": {"type": "object", "properties": {k: {"type": "string"} for k in ("self", "result", "file")}}}},
        "Result": {"type": "object", "properties": {
            "submission": {"type": "integer"}, "request": {"type": "integer"}, "created_at": DT,
            "grader_version": {"type": "string"},
            "report": {"type": "object", "description": "the judge's report, as `grader check --json` prints it "
                                                         "(without the seed for students)"},
            "score": {"type": ["object", "null"], "description": "rubric score; null until a rubric scored it"},
            "rubric_version": {"type": ["string", "null"]}, "current": {"type": "boolean"},
            "previous": {"type": "object", "description": "the score of the request before (after a regrade)"},
            "diff": {"description": "what changed between the previous score and this one"},
            "partial": {"type": "boolean", "description": "false: a stored result (see PartialResult)"}}},
        "PartialResult": {"type": "object", "description": "a submission queued or running that has no result yet: "
                          "the checks decided so far, each exactly as it will be in the final report",
                          "properties": {
            "submission": {"type": "integer"}, "request": {"type": "integer"},
            "partial": {"type": "boolean", "const": True}, "current": {"type": "boolean", "const": False},
            "status": {"type": "string", "enum": ["queued", "running"]},
            "progress": {"type": ["object", "null"], "description": "as in Submission"},
            "report": {"type": "object", "properties": {"checks": {
                "type": "array", "items": {"type": "object"},
                "description": "the verdicts decided so far (a check's result as in the report), in check order"}}},
            "score": {"type": "null", "description": "no score until the result is stored"},
            "pending": {"type": "array", "items": {"type": "string"}, "description": "the checks still to come"},
            "message": {"type": "string"}}},
        "Attempt": {"type": "object", "properties": {
            "request": {"type": "integer"}, "number": {"type": "integer"}, "worker": {"type": "string"},
            "task_id": {"type": ["string", "null"]}, "started_at": DT, "finished_at": DT,
            "outcome": {"type": ["string", "null"], "enum": ["graded", "retry", "failed", "lost", "superseded", None]},
            "message": {"type": ["string", "null"]}}},
        "Student": {"type": "object", "properties": {
            **{k: {"type": "string"} for k in ("username", "name", "email")},
            "state": {"type": "string", "enum": ["active", "deactivated", "removed"]},
            "created_at": DT, "deactivated_at": DT, "removed_at": DT}},
    }


def paths() -> dict:
    upload = {"required": True, "content": {
        "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
            "file": {"type": "string", "format": "binary"},
            "student": {"type": "string", "description": "instructor uploads: the student's username"}}}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}
    sub_list = {"type": "array", "items": ref("Submission")}
    return {
        "/api/v1/openapi.json": {"get": op("operations", "This document", ok({"type": "object"}), public=True)},
        "/api/v1/health": {"get": op("operations", "Liveness: the database answers", ok({"type": "object"}),
                                     public=True)},
        "/api/v1/me": {"get": op("operations", "The caller's role and student", ok({"type": "object"}) | errors(401))},
        "/api/v1/queue": {"get": op("operations", "Submissions by status and what is running",
                                    ok({"type": "object"}) | errors(401, 403), role="instructor")},
        "/api/v1/assignments": {
            "get": op("assignments", "List assignments",
                      ok({"type": "array", "items": ref("Assignment")}) | errors(401)),
            "post": op("assignments", "Create an assignment (checks, seed, limits)",
                       ok(ref("Assignment"), "Created", "201") | errors(400, 401, 403, 409),
                       body=json_body(ref("AssignmentInput")), role="instructor")},
        "/api/v1/assignments/{slug}": {
            "get": op("assignments", "One assignment with its rules: for a student their own (due date, extension, "
                      "late policy, which submission counts, attempts left, what an upload now would lose); a draft "
                      "or archived assignment is 404 to students",
                      ok(ref("Assignment")) | errors(401, 404), [SLUG]),
            "patch": op("assignments", "Change an assignment's settings",
                        ok(ref("Assignment")) | errors(400, 401, 403, 404),
                        [SLUG], json_body(ref("AssignmentInput")), role="instructor")},
        "/api/v1/assignments/{slug}/submissions": {
            "post": op("submissions", "Upload a file: validated (size, UTF-8, parses, TRACK) before it is queued; "
                                      "the student's latest file uploaded again is recognised (200, duplicate)",
                       ok(ref("Submission"), "Queued", "202") | ok(ref("Submission"), "Identical to the latest")
                       | errors(400, 401, 403, 404, 413, 422),
                       [SLUG, query("filename", "file name for a raw-body upload"),
                        query("student", "instructor uploads: the student")], upload),
            "get": op("submissions", "List submissions (a student sees only their own)",
                      ok(sub_list) | errors(401, 404),
                      [SLUG, query("status", "filter", enum=("queued", "running", "done", "failed")),
                       query("student", "filter (instructors)"), query("limit", "at most 1000", "integer"),
                       query("offset", "skip this many", "integer")])},
        "/api/v1/assignments/{slug}/regrade": {
            "post": op("results", "Regrade each student's counted submission (or all): without confirm, only how many",
                       ok({"type": "object", "description": "the dry run: count, submissions, skipped"})
                       | ok({"type": "object", "description": "with confirm: the same and queued"}, "Queued", "202")
                       | errors(400, 401, 403, 404), [SLUG],
                       json_body({"type": "object", "properties": {
                           "which": {"enum": ["counted", "all"], "description": "default counted"},
                           "confirm": {"type": "boolean", "description": "default false: a dry run"}}},
                                 required=False), role="instructor")},
        "/api/v1/assignments/{slug}/export": {
            "get": op("results", "The gradebook: per roster student their name, e-mail, state, the counted "
                      "submission's id, score and late penalty (fraction and points)",
                      {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "array"}},
                                                                "text/csv": {"schema": {"type": "string"}}}}}
                      | errors(401, 403, 404), [SLUG, query("format", "json (default) or csv", enum=("json", "csv"))],
                      role="instructor")},
        "/api/v1/submissions/{submission_id}": {
            "get": op("submissions", "Status, queue position and the check in progress; polls may send the "
                      "ETag back (304 while unchanged) and wait Retry-After seconds",
                      ok(ref("Submission")) | NOT_MODIFIED | errors(401, 404), [SID, IF_NONE_MATCH])},
        "/api/v1/submissions/{submission_id}/file": {
            "get": op("submissions", "The uploaded file",
                      {"200": {"description": "OK", "content": {"text/x-python": {"schema": {"type": "string"}}}}}
                      | errors(401, 404), [SID])},
        "/api/v1/submissions/{submission_id}/result": {
            "get": op("results", "The latest result and its score; while a submission without a result is queued or "
                      "running, the verdicts decided so far (partial: true, no score); 404 not_graded when it failed",
                      ok({"oneOf": [ref("Result"), ref("PartialResult")]}) | errors(401, 404), [SID])},
        "/api/v1/submissions/{submission_id}/results": {
            "get": op("results", "Every grading request's result (regrades keep the old ones)",
                      ok({"type": "array", "items": ref("Result")}) | errors(401, 404), [SID])},
        "/api/v1/submissions/{submission_id}/attempts": {
            "get": op("operations", "Every claim of the submission by a worker and how it ended",
                      ok({"type": "array", "items": ref("Attempt")}) | errors(401, 403, 404), [SID],
                      role="instructor")},
        "/api/v1/submissions/{submission_id}/regrade": {
            "post": op("results", "Run the judge again; the earlier result is kept",
                       ok(ref("Submission"), "Queued", "202") | errors(401, 403, 404, 409), [SID], role="instructor")},
        "/api/v1/assignments/{slug}/extensions": {
            "get": op("assignments", "The assignment's per-student extensions",
                      ok({"type": "array", "items": ref("Extension")}) | errors(401, 403, 404), [SLUG],
                      role="instructor")},
        "/api/v1/assignments/{slug}/extensions/{username}": {
            "put": op("assignments", "Give a student exactly this extension (replacing theirs): a due date with its "
                      "zone, extra attempts per period, or both; their results are rescored",
                      ok(ref("Extension")) | errors(400, 401, 403, 404), [SLUG, path_param("username")],
                      json_body({"type": "object", "properties": {
                          "due_at": DT, "extra_attempts": {"type": "integer", "minimum": 0},
                          "reason": {"type": "string"}}}), role="instructor"),
            "delete": op("assignments", "Take a student's extension away; their results are rescored",
                         ok({"type": "object"}) | errors(401, 403, 404), [SLUG, path_param("username")],
                         role="instructor")},
        "/api/v1/rubrics": {
            "get": op("assignments", "The stored rubric versions", ok({"type": "array", "items": ref("Rubric")})
                      | errors(401, 403), role="instructor"),
            "post": op("assignments", "Validate and store a rubric file (TOML as the body, or {rubric, filename}); "
                       "a refusal names each problem's line; the same text answers the stored version (200)",
                       ok(ref("Rubric"), "Stored", "201") | ok(ref("Rubric"), "Already stored")
                       | errors(400, 401, 403),
                       body={"required": True, "content": {
                           "application/toml": {"schema": {"type": "string"}},
                           "application/json": {"schema": {"type": "object", "properties": {
                               "rubric": {"type": "string"}, "filename": {"type": "string"}}}}}},
                       role="instructor")},
        "/api/v1/submissions/{submission_id}/choose": {
            "post": op("submissions", "A student chooses their own submission to count (only where the assignment "
                       "counts the chosen submission: else 409); the newest choice wins",
                       ok(ref("Submission")) | errors(401, 403, 404, 409), [SID])},
        "/api/v1/submissions/{submission_id}/manual": {
            "put": op("results", "Points for manual rubric items (then rescored)", ok({"type": "object"})
                      | errors(400, 401, 403, 404), [SID], json_body({"type": "object"}), role="instructor")},
        "/api/v1/rescore": {
            "post": op("results", "Recompute scores from stored results with the current rubric (no student code runs)",
                       ok({"type": "object"}) | errors(401, 403, 404, 503),
                       body=json_body({"type": "object", "properties": {"assignment": {"type": "string"}}}, False),
                       role="instructor")},
        "/api/v1/students": {
            "get": op("roster", "The roster with each student's state (removed students only with removed=true)",
                      ok({"type": "array", "items": ref("Student")}) | errors(401, 403),
                      [query("removed", "true: removed students too", "boolean")], role="instructor"),
            "post": op("roster", "Add a student (username 1-64 of letters, digits, . _ -; e-mail like a@b.edu)",
                       ok(ref("Student"), "Created", "201") | errors(400, 401, 403, 409),
                       body=json_body(ref("Student")), role="instructor")},
        "/api/v1/students/import": {
            "post": op("roster", "Import a roster CSV (username[,name,email]): every row or none; a refusal lists "
                       "each bad row in 'problems'",
                       ok({"type": "object", "properties": {"added": {"type": "integer"},
                                                            "students": {"type": "array"}}})
                       | errors(400, 401, 403, 409),
                       [query("tokens", "true: issue a token to each new student (shown once)", "boolean"),
                        query("reissue", "with tokens: new tokens for students already there too", "boolean")],
                       {"required": True, "content": {
                           "text/csv": {"schema": {"type": "string"}},
                           "application/json": {"schema": {"type": "object", "properties": {
                               "csv": {"type": "string"}, "tokens": {"type": "boolean"},
                               "reissue": {"type": "boolean"}}}}}}, role="instructor")},
        "/api/v1/students/{username}": {
            "get": op("roster", "One student and their state (removed ones too)", ok(ref("Student"))
                      | errors(401, 403, 404), [path_param("username")], role="instructor")},
        "/api/v1/students/{username}/deactivate": {
            "post": op("roster", "Deactivate: no sign-in or upload; stays on the roster and gradebook",
                       ok(ref("Student")) | errors(401, 403, 404, 409), [path_param("username")],
                       role="instructor")},
        "/api/v1/students/{username}/reactivate": {
            "post": op("roster", "Undo a deactivation or a removal (a removed student's tokens stay revoked)",
                       ok(ref("Student")) | errors(401, 403, 404), [path_param("username")], role="instructor")},
        "/api/v1/students/{username}/remove": {
            "post": op("roster", "Remove: off the roster and gradebook, tokens revoked, submissions kept",
                       ok(ref("Student")) | errors(401, 403, 404), [path_param("username")], role="instructor")},
        "/api/v1/students/{username}/tokens": {
            "post": op("roster", "Issue another token for the student (shown once; the others stay valid)",
                       ok(TOKEN, "Created", "201") | errors(401, 403, 404, 409), [path_param("username")],
                       role="instructor")},
        "/api/v1/students/{username}/rotate-token": {
            "post": op("roster", "Revoke the student's tokens and issue one new one (shown once)",
                       ok(TOKEN, "Created", "201") | errors(401, 403, 404, 409), [path_param("username")],
                       role="instructor")},
    }


def analytics_paths() -> dict:
    """The class analytics' routes, described beside them (api/analytics.py imports this module)."""
    from .analytics import openapi_paths
    return openapi_paths()


def feedback_paths() -> dict:
    """Feedback visibility's routes, described beside them (api/feedback.py)."""
    from .feedback import openapi_paths
    return openapi_paths()


def grading_paths() -> dict:
    """The grading queue's and line comments' routes, described beside them (api/grading.py)."""
    from .grading import openapi_paths
    return openapi_paths()


def document() -> dict:
    """The whole OpenAPI document."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Transformer capstone grader API", "version": __version__,
                 "description": "Upload, queue, grade and score submissions. Every call except openapi.json and "
                                "health needs 'Authorization: Bearer <token>': an instructor token, or a student "
                                "token that sees only that student's submissions."},
        "servers": [{"url": "/"}],
        "tags": [{"name": t} for t in TAGS],
        "security": [{"bearer": []}],
        "paths": {**paths(), **analytics_paths(), **feedback_paths(), **grading_paths()},
        "components": {"schemas": schemas(),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
