"""The store: assignments, submissions, their place in the queue and their results, as plain functions over a
session; and StoreError, the refusal every store function (here, accounts.py, coursework.py) raises.

The API, the pages, the CLI and the worker all go through these. The grading state machine (claim, heartbeat,
finish, release, sweep) is in jobs.py; students and tokens in accounts.py; scores, reports and releases in
coursework.py.
"""
import os
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, bindparam, case, func, or_, select
from sqlalchemy.orm import Session, aliased, joinedload, with_expression

from ..source import Rejected, Source, read_source
from .files import clean_filename
from . import rules
from .models import Assignment, Attempt, Result, Student, Submission, utcnow

ASSIGNMENT_FIELDS = ("title", "track", "checks", "seed", "limits")


class StoreError(Exception):
    """A request the store refuses; `status` is the HTTP status the API answers with."""
    status = 400

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class NotFound(StoreError):
    status = 404


class Conflict(StoreError):
    status = 409


# ---------------------------------------------------------------- assignments

def validate_assignment(fields: dict) -> dict:
    """Check the grading settings (the course rules: apply_settings); StoreError names a bad one."""
    from ..sandbox import Limits  # the worker's package (a dozen modules): web processes load it only here
    from ..registry import check_ids
    all_ids = check_ids()
    out = {}
    for key, value in fields.items():
        if key not in ASSIGNMENT_FIELDS:
            known = ", ".join(ASSIGNMENT_FIELDS + RULE_FIELDS)
            raise StoreError(f"unknown assignment field {key!r}; known: {known}")
        if key == "track" and value not in (None, "reverse", "lm"):
            raise StoreError('track must be "reverse", "lm" or null (either)')
        if key == "title":
            value = str(value or "")[:200]
        if key == "checks":
            value = list(value or [])
            unknown = [c for c in value if c not in all_ids]
            if unknown:
                raise StoreError(f"unknown check id {', '.join(map(str, unknown))}; known: {', '.join(all_ids)}")
        if key == "seed" and value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise StoreError("seed must be an integer or null (the judge's default)")
        if key == "limits":
            value = dict(value or {})
            try:
                Limits(**value)
            except TypeError:
                raise StoreError(f"unknown limit in {sorted(value)}; known: {', '.join(Limits().to_dict())}") from None
        out[key] = value
    return out


# The course rules an assignment takes (issue 17): its state and dates, its pinned rubric (stored TOML text, or the
# id of a stored one; null: the packaged rubric), and overrides of the rubric's [policy] (null: the rubric's rule).
RULE_FIELDS = ("state", "opens_at", "due_at", "rubric", "rubric_filename", "rubric_id", "rules") + rules.RULE_KEYS


def apply_settings(s: Session, assignment: Assignment, fields: dict, instructor=None) -> bool:
    """Check every setting first, then set them; True when a setting that changes scores changed."""
    from .models import ASSIGNMENT_STATES
    course = {k: fields.pop(k) for k in list(fields) if k in RULE_FIELDS}
    plain = validate_assignment(fields)
    given = course.pop("rules", None) or {}
    if not isinstance(given, dict):
        raise StoreError(f"rules must be an object {{rule: value}} with rules from {', '.join(rules.RULE_KEYS)}")
    given = {**given, **{k: course[k] for k in rules.RULE_KEYS if k in course}}
    try:
        overrides = {k: rules.clean_rule(k, v) for k, v in given.items()}
        dates = {k: rules.parse_moment(course[k], k) for k in ("opens_at", "due_at") if k in course}
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    state = course.get("state", assignment.state or "open")
    if state not in ASSIGNMENT_STATES:
        raise StoreError(f"state must be one of {', '.join(ASSIGNMENT_STATES)}, not {state!r}")
    opens, due = dates.get("opens_at", assignment.opens_at), dates.get("due_at", assignment.due_at)
    if opens is not None and due is not None and opens >= due:
        raise StoreError(f"opens_at ({opens.isoformat()}Z) must be before due_at ({due.isoformat()}Z)")
    pinned = assignment.rubric_id
    if course.get("rubric"):
        from .rubrics import store_rubric
        pinned = store_rubric(s, course["rubric"], course.get("rubric_filename") or "", instructor).id
    elif "rubric_id" in course or "rubric" in course:
        from .rubrics import get_rubric_version
        pinned = get_rubric_version(s, course["rubric_id"]).id if course.get("rubric_id") is not None else None
    before = (assignment.rubric_id, assignment.due_at, dict(assignment.rules or {}))
    for key, value in plain.items():
        setattr(assignment, key, value)
    merged = {**(assignment.rules or {}), **overrides}
    assignment.rules = {k: v for k, v in merged.items() if v is not None}
    assignment.state, assignment.rubric_id = state, pinned
    for key, value in dates.items():
        setattr(assignment, key, value)
    s.flush()
    return (assignment.rubric_id, assignment.due_at) != before[:2] or any(
        assignment.rules.get(k) != before[2].get(k) for k in ("grace_minutes", "late_penalty_per_day",
                                                              "late_penalty_max"))


def create_assignment(s: Session, slug: str, instructor=None, **fields) -> Assignment:
    """A new assignment; by default graded exactly as `grader check` grades, under the packaged rubric's rules."""
    if not slug or len(slug) > 64 or not slug.replace("-", "").replace("_", "").isalnum():
        raise StoreError("slug must be 1-64 letters, digits, '-' or '_'")
    if s.scalar(select(Assignment).where(Assignment.slug == slug)):
        raise Conflict(f"assignment {slug!r} already exists")
    assignment = Assignment(slug=slug, checks=[], limits={}, title="", rules={}, state="open")
    apply_settings(s, assignment, dict(fields), instructor)  # checked before the row is added
    s.add(assignment)
    s.flush()
    return assignment


def update_assignment(s: Session, slug: str, instructor=None, **fields) -> Assignment:
    """Change an assignment's settings (grading settings apply to gradings that start afterwards). A new rubric,
    due date, grace or late penalty rescores the assignment's stored results at once (no code runs);
    `assignment.rescored` is then how many (else None)."""
    assignment = get_assignment(s, slug)
    rescored = None
    if apply_settings(s, assignment, dict(fields), instructor):
        from .coursework import rescore
        rescored = rescore(s, assignment)["rescored"]
    assignment.rescored = rescored  # not a column: what this update did, for the caller to report
    return assignment


def get_assignment(s: Session, slug: str) -> Assignment:
    """The assignment, or NotFound."""
    assignment = s.scalar(select(Assignment).where(Assignment.slug == slug))
    if assignment is None:
        raise NotFound(f"no assignment {slug!r}")
    return assignment


STUDENT_STATES = ("open", "closed")  # draft and archived assignments do not exist for students


def student_assignment(s: Session, slug: str) -> Assignment:
    """The assignment as a student may see it: a draft or archived one is NotFound, like a missing one."""
    assignment = s.scalar(select(Assignment).where(Assignment.slug == slug))
    if assignment is None or assignment.state not in STUDENT_STATES:
        raise NotFound(f"no assignment {slug!r}")
    return assignment


def list_assignments(s: Session, for_student: bool = False, include_archived: bool = False) -> list[Assignment]:
    """Assignments in creation order: a student's (open and closed), or the instructor's (archived ones only when
    asked)."""
    q = select(Assignment).order_by(Assignment.id)
    if for_student:
        q = q.where(Assignment.state.in_(STUDENT_STATES))
    elif not include_archived:
        q = q.where(Assignment.state != "archived")
    return list(s.scalars(q))


# ---------------------------------------------------------------- submissions

@dataclass
class Upload:
    """What an upload did: the submission, and whether it is new or the student's latest file again."""
    submission: Submission
    created: bool
    duplicate: bool = False


def validate_upload(data: bytes, assignment: Assignment) -> Source:
    """The upload rules of docs/contract.md; Rejected names the problem."""
    source = read_source(data)
    if source.track is None:
        raise Rejected(source.track_problem)
    if assignment.track and source.track != assignment.track:
        raise Rejected(f'TRACK is "{source.track}" but assignment {assignment.slug!r} is graded on '
                       f'track "{assignment.track}"')
    return source


class TooMany(StoreError):
    status = 429


def create_submission(s: Session, assignment: Assignment, student: Student, data: bytes, filename: str,
                      archive_dir: str | None = None, enforce_attempts: bool = False,
                      enforce_rules: bool = True) -> Upload:
    """Validate and store an upload as queued; the same file as the student's latest is that submission again.

    With enforce_rules (a student's upload), the assignment's state and opening time apply: a draft or archived
    assignment is NotFound, a closed or not yet open one refuses (403, naming why). With enforce_attempts, the
    assignment's attempts per period apply, the student's extra attempts included (TooMany says when more are
    allowed).
    """
    if student.removed_at is not None or student.deactivated_at is not None:
        # The API and the pages refuse such a student's token first; the store refuses too, whoever calls it.
        state = "removed" if student.removed_at is not None else "deactivated"
        raise StoreError(f"the account {student.username!r} is {state}: it cannot submit", 403)
    rules_now = rules.rules_for(s, assignment, student) if enforce_rules or enforce_attempts else None
    if enforce_rules:
        refusal = rules.upload_refusal(rules_now)
        if refusal is not None:
            status, why = refusal
            raise (NotFound(f"no assignment {assignment.slug!r}") if status == 404 else StoreError(why, status))
    source = validate_upload(data, assignment)
    filename = clean_filename(filename, "submission.py")  # no CR/LF or path: it becomes a header and a path
    mine = select(Submission).where(Submission.assignment_id == assignment.id, Submission.student_id == student.id)
    latest = s.scalar(mine.order_by(Submission.id.desc()).limit(1))
    if latest is not None and latest.sha256 == source.sha256:
        return Upload(latest, created=False, duplicate=True)
    earlier = s.scalar(mine.where(Submission.sha256 == source.sha256).order_by(Submission.id).limit(1))
    now = utcnow()
    if enforce_attempts:
        check_attempts(s, assignment, student, now, rules_now)
    sub = Submission(assignment_id=assignment.id, student_id=student.id, filename=filename, sha256=source.sha256,
                     size=len(data), content=data, track=source.track, same_as=earlier.id if earlier else None,
                     status="queued", request=1, attempts=0, task_id=new_task_id(), enqueued_at=now, created_at=now)
    s.add(sub)
    s.flush()
    if archive_dir:
        archive(archive_dir, sub)
    return Upload(sub, created=True, duplicate=earlier is not None)


def check_attempts(s: Session, assignment: Assignment, student: Student, now: datetime, rules_now=None) -> None:
    """TooMany when the student has used every attempt of the current period on this assignment (its rules, with
    the student's extra attempts)."""
    rules_now = rules_now or rules.rules_for(s, assignment, student)
    if not rules_now.attempts:
        return
    status = rules.attempts_status(s, assignment, student, now, rules_now)
    if status["left"] == 0:
        again = status["resets_at"]
        raise TooMany(f"you have used all {rules_now.attempts} submissions allowed per {rules_now.period} on "
                      f"{assignment.slug!r}" + (f"; you can submit again from {again.isoformat(timespec='minutes')}"
                                                if again else "; no more submissions are allowed this term"))


def archive(directory: str, sub: Submission) -> None:
    """A copy on disk, <dir>/<assignment>/<student>/<id>-<name>, written atomically (the database is the truth)."""
    folder = os.path.join(directory, sub.assignment.slug, sub.student.username)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{sub.id}-{sub.filename}")
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(sub.content)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def new_task_id() -> str:
    return str(uuid.uuid4())


def queued_before(row, enqueued_at, submission_id):
    """Count the queued submissions (`row`: Submission or an alias) sent to the queue before this place in it."""
    return select(func.count()).select_from(row).where(
        row.status == "queued",
        or_(row.enqueued_at < enqueued_at, and_(row.enqueued_at == enqueued_at, row.id < submission_id)))


# Built once, as the status polls run them: a submission with what its status JSON names (assignment, student)
# joined in and, when queued, the count ahead of it computed by the same statement. The file stays deferred.
_ahead = aliased(Submission)
STATUS_LOAD = (joinedload(Submission.assignment, innerjoin=True), joinedload(Submission.student, innerjoin=True),
               with_expression(Submission.queued_ahead, case((Submission.status == "queued", queued_before(
                   _ahead, Submission.enqueued_at, Submission.id).scalar_subquery()))))
BY_ID = select(Submission).options(*STATUS_LOAD).where(Submission.id == bindparam("id"))
AHEAD = queued_before(Submission, bindparam("enqueued_at"), bindparam("id"))


def find_submission(s: Session, submission_id: int) -> Submission | None:
    """The submission with its assignment, student and queue position, in one query (not the file); None if missing."""
    return s.scalar(BY_ID, {"id": submission_id})


def list_submissions(s: Session, assignment: Assignment | None = None, student: Student | None = None,
                     status: str | None = None, limit: int = 1000, offset: int = 0) -> list[Submission]:
    q = select(Submission).options(*STATUS_LOAD).order_by(Submission.id)
    if assignment is not None:
        q = q.where(Submission.assignment_id == assignment.id)
    if student is not None:
        q = q.where(Submission.student_id == student.id)
    if status:
        q = q.where(Submission.status == status)
    return list(s.scalars(q.limit(limit).offset(offset)))


def latest_submissions(s: Session, assignment: Assignment) -> dict[int, Submission]:
    """student id -> that student's latest submission to the assignment."""
    newest = (select(func.max(Submission.id)).where(Submission.assignment_id == assignment.id)
              .group_by(Submission.student_id))
    return {sub.student_id: sub for sub in s.scalars(select(Submission).where(Submission.id.in_(newest)))}


def queue_position(s: Session, sub: Submission) -> int | None:
    """1 for the next to be graded: queued submissions sent to the queue before this one, plus one."""
    if sub.status != "queued":
        return None
    ahead = sub.queued_ahead
    if ahead is None:
        ahead = s.scalar(AHEAD, {"enqueued_at": sub.enqueued_at, "id": sub.id})
    return ahead + 1


def queue_counts(s: Session) -> dict:
    """Submissions by status."""
    rows = s.execute(select(Submission.status, func.count()).group_by(Submission.status))
    return {status: n for status, n in rows}


def request_regrade(s: Session, sub: Submission) -> Submission:
    """Grade again (a new grading request); the earlier results stay, for the score before and after."""
    if sub.status in ("queued", "running"):
        raise Conflict(f"submission {sub.id} is {sub.status}; regrade it once it is done")
    sub.request += 1
    sub.status, sub.attempts, sub.claim, sub.current_check = "queued", 0, None, None
    sub.error, sub.not_before, sub.started_at, sub.finished_at = None, None, None, None
    sub.task_id, sub.enqueued_at = new_task_id(), utcnow()
    s.flush()
    return sub


REGRADE_WHICH = ("counted", "all")


@dataclass
class RegradePlan:
    """What a regrade of an assignment would do: the submissions it regrades, and those it skips (still grading)."""
    which: str  # counted | all
    regrade: list[Submission]
    skipped: list[Submission]  # queued or running: regraded by then anyway


def regrade_plan(s: Session, assignment: Assignment, which: str = "counted") -> RegradePlan:
    """The counted submission of each student (rules.counted_submissions), or every submission of the assignment."""
    if which not in REGRADE_WHICH:
        raise StoreError(f'which must be "counted" or "all", not {which!r}')
    if which == "counted":
        from .rules import counted_submissions  # rules reads the store: imported here, not at the top
        # The gradebook's rows: students on the roster (a removed student's grade no longer counts anywhere).
        removed = set(s.scalars(select(Student.id).where(Student.removed_at.is_not(None))))
        subs = sorted((sub for sid, sub in counted_submissions(s, assignment).items() if sid not in removed),
                      key=lambda sub: sub.id)
    else:
        subs = list(s.scalars(select(Submission).where(Submission.assignment_id == assignment.id)
                              .order_by(Submission.id)))
    return RegradePlan(which, [sub for sub in subs if sub.status in ("done", "failed")],
                       [sub for sub in subs if sub.status in ("queued", "running")])


def regrade_counted(s: Session, assignment: Assignment) -> list[Submission]:
    """Grade each student's counted submission again, except those already queued or running."""
    return run_regrade(s, regrade_plan(s, assignment, "counted"))


def regrade_all(s: Session, assignment: Assignment) -> list[Submission]:
    """Grade every submission of the assignment again, except those already queued or running."""
    return run_regrade(s, regrade_plan(s, assignment, "all"))


def run_regrade(s: Session, plan: RegradePlan) -> list[Submission]:
    """Queue a new grading request for each submission the plan regrades."""
    for sub in plan.regrade:
        request_regrade(s, sub)
    return plan.regrade


# ---------------------------------------------------------------- results

def results_of(s: Session, sub: Submission) -> list[Result]:
    """Every stored result of the submission, oldest request first."""
    return list(s.scalars(select(Result).where(Result.submission_id == sub.id).order_by(Result.request)))


def latest_result(s: Session, sub: Submission) -> Result | None:
    return s.scalar(select(Result).where(Result.submission_id == sub.id).order_by(Result.request.desc()).limit(1))


def attempts_of(s: Session, sub: Submission) -> list[Attempt]:
    return list(s.scalars(select(Attempt).where(Attempt.submission_id == sub.id)
                          .order_by(Attempt.request, Attempt.number)))
