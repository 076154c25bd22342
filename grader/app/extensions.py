"""Per-student extensions of an assignment: a later due date (lateness counted from it), extra attempts per
period, or both. Giving, changing or removing one rescores the assignment's stored results (never re-runs code)."""
from sqlalchemy import select
from sqlalchemy.orm import Session

from . import rules
from .models import Assignment, Extension, Student
from .store import StoreError


def list_extensions(s: Session, assignment: Assignment) -> list[tuple[Extension, str]]:
    """Every extension of the assignment with its student's username, by username."""
    q = (select(Extension, Student.username).join(Student, Student.id == Extension.student_id)
         .where(Extension.assignment_id == assignment.id).order_by(Student.username))
    return [(ext, name) for ext, name in s.execute(q).all()]


def set_extension(s: Session, assignment: Assignment, student: Student, due_at=None, extra_attempts=0,
                  reason: str = "", instructor=None) -> tuple[Extension, int]:
    """Give the student exactly this extension (replacing theirs): due_at (ISO 8601 with its zone, or an aware
    datetime; None keeps the assignment's) and extra attempts per period. (the extension, results rescored)."""
    try:
        until = rules.parse_moment(due_at, "due_at")
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    extra = 0 if extra_attempts is None else extra_attempts
    if not isinstance(extra, int) or isinstance(extra, bool) or not 0 <= extra <= 10_000:
        raise StoreError(f"extra_attempts must be a whole number from 0, not {extra_attempts!r}")
    if until is None and not extra:
        raise StoreError("an extension needs a new due date (due_at), extra attempts, or both")
    ext = rules.extension_of(s, assignment, student) or Extension(assignment_id=assignment.id, student_id=student.id)
    ext.due_at, ext.extra_attempts, ext.reason = until, extra, str(reason or "")[:2000]
    ext.instructor_id = instructor.id if instructor is not None else None
    s.add(ext)
    s.flush()
    return ext, rescore(s, assignment, student)


def remove_extension(s: Session, assignment: Assignment, student: Student) -> int:
    """Take the student's extension away (StoreError 404 when there is none); the results rescored."""
    ext = rules.extension_of(s, assignment, student)
    if ext is None:
        raise StoreError(f"{student.username} has no extension on {assignment.slug!r}", 404)
    s.delete(ext)
    s.flush()
    return rescore(s, assignment, student)


def rescore(s: Session, assignment: Assignment, student: Student) -> int:
    """The student's late penalties on the assignment follow the extension now in force."""
    from .coursework import rescore as run
    return run(s, assignment, student)["rescored"]
