"""An assignment's rules as the student pages show them: the sentences, what a late upload costs now, whether an upload
is accepted now (and why not), the attempts left, and the submission that counts."""
from datetime import datetime, timezone

from flask import current_app
from sqlalchemy.orm import Session

from .. import rules, rules_text, store
from ..models import Assignment, Student

STUDENT_STATES = ("open", "closed")  # as store.student_assignment: draft and archived ones do not exist for students


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def visible_to_students(assignment: Assignment) -> bool:
    return assignment.state in STUDENT_STATES


def refusal(r, now: datetime) -> str | None:
    """Why an upload would be refused now (closed, not yet open), in the words the select shows; None if accepted."""
    if r.state != "open":
        return "closed: uploads are no longer accepted"
    if r.opens_at is not None and rules_text.utc(r.opens_at) > now:
        return f"opens {rules_text.moment(r.opens_at, now)}"
    return None


def attempts(s: Session, assignment: Assignment, student: Student, r, now: datetime) -> dict | None:
    """rules.attempts_status for this student and assignment; None when unlimited or not enforced (ENFORCE_ATTEMPTS)."""
    if not r.attempts or not current_app.config["ENFORCE_ATTEMPTS"]:
        return None
    return rules.attempts_status(s, assignment, student, now, r)


def late_data(r) -> dict:
    """What web.js's late notice needs to keep itself up to date on an open page (the server computed it first)."""
    deadline = rules_text.utc(r.deadline)
    return {"deadline": deadline.isoformat() if deadline else "", "grace": r.grace_minutes,
            "per-day": r.late_per_day, "max": r.late_max}


def assignment_rules(s: Session, assignment: Assignment, student: Student, now: datetime | None = None) -> dict:
    """Everything the submit and result pages say about one assignment's rules for this student."""
    now = now or now_utc()
    r = rules.rules_for(s, assignment, student)
    left = attempts(s, assignment, student, r, now)
    fraction = rules.late_fraction(r, now)
    return {"assignment": assignment, "rules": r, "lines": rules_text.describe(r, left, now),
            "late": rules_text.late_notice(r, fraction, now), "late_fraction": fraction,
            "late_data": late_data(r) if r.deadline is not None and r.state == "open" else None,
            "refusal": refusal(r, now), "attempts": left}


def student_assignments(s: Session, student: Student, now: datetime | None = None) -> list[dict]:
    """The assignments this student can see (open or closed), each with its rules."""
    now = now or now_utc()
    return [assignment_rules(s, a, student, now) for a in store.list_assignments(s) if visible_to_students(a)]
