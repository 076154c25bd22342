"""Grading by hand what counts: the manual-grading queue of an assignment (each student's counted submission that
still has manual rubric items to grade), who grades which, and comments on lines of a submitted file.

Plain functions over a session, for the API and the pages. Which submission counts is rules.py's to say; the items
to grade are the manual items of the assignment's pinned rubric (rules.rubric_for).
"""
import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from . import coursework
from .models import Assignment, Instructor, LineComment, Student, Submission
from .store import NotFound, StoreError

SHOW = ("needs", "graded", "all")  # needs grading | every manual item graded | both
COMMENT_MAX = 4000
LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what Python counts as a line in tracebacks; not \f or \v, unlike splitlines


@dataclass
class Entry:
    """One counted submission in the queue, and how far its manual grading is."""
    submission: Submission
    student: Student
    grader: Instructor | None
    items: int  # manual items of the rubric
    left: list[str]  # the ids of those not graded yet, rubric order
    total: float | None  # the current score, when graded automatically
    max: float | None

    @property
    def graded(self) -> bool:
        return not self.left

    @property
    def id(self) -> int:
        return self.submission.id


def manual_ids(s: Session, assignment: Assignment) -> list[str]:
    """The ids of the assignment's rubric's manual items, rubric order."""
    from .rules import rubric_for
    return [item.id for _, item in coursework.manual_items(rubric_for(s, assignment))]


def items_left(ids: list[str], manual: dict | None) -> list[str]:
    """The manual items without points in `manual` (Submission.manual)."""
    manual = manual or {}
    return [i for i in ids if not (isinstance(manual.get(i), dict) and manual[i].get("points") is not None)
            and not isinstance(manual.get(i), (int, float))]


def counted(s: Session, assignment: Assignment) -> dict[int, Submission]:
    """student id -> the submission that counts (rules.py)."""
    from .rules import counted_submissions
    return counted_submissions(s, assignment)


def counted_ids(s: Session, assignments) -> set[int]:
    """The ids of the counted submissions of these assignments (the dashboard marks them)."""
    out = set()
    for a in assignments:
        out |= {sub.id for sub in counted(s, a).values()}
    return out


def find_grader(s: Session, username: str) -> Instructor:
    """An active instructor by username; NotFound names it."""
    row = s.scalar(select(Instructor).where(Instructor.username == username))
    if row is None or row.disabled_at is not None:
        raise NotFound(f"no active instructor {username!r}")
    return row


def graders(s: Session) -> list[Instructor]:
    """Every active instructor account, by username."""
    return list(s.scalars(select(Instructor).where(Instructor.disabled_at.is_(None)).order_by(Instructor.username)))


def queue(s: Session, assignment: Assignment, show: str = "needs", grader: str | None = None,
          student: str = "") -> list[Entry]:
    """The counted submissions with manual items, filtered, ordered by student.

    show: needs | graded | all; grader: None (anyone), "unassigned", or an instructor's username; student: part of a
    roster id or name.
    """
    if show not in SHOW:
        raise StoreError(f'show must be one of {", ".join(SHOW)}, not {show!r}')
    ids = manual_ids(s, assignment)
    if not ids:
        return []
    by_student = counted(s, assignment)
    students = {st.id: st for st in s.scalars(select(Student).where(Student.id.in_(list(by_student))))}
    instructors = {i.id: i for i in s.scalars(select(Instructor))}
    wanted = None
    if grader and grader != "unassigned":
        wanted = find_grader(s, grader).id
    needle = student.strip().lower()
    scores = coursework.current_scores(s, [sub.id for sub in by_student.values()])
    out = []
    for student_id, sub in by_student.items():
        st = students.get(student_id)
        if st is None or st.removed_at is not None:  # a removed student is off the roster and the gradebook
            continue
        if needle and needle not in st.username.lower() and needle not in (st.name or "").lower():
            continue
        if grader == "unassigned" and sub.grader_id is not None:
            continue
        if wanted is not None and sub.grader_id != wanted:
            continue
        left = items_left(ids, sub.manual)
        if (show == "needs" and not left) or (show == "graded" and left):
            continue
        score = scores.get(sub.id, (None, None))[1]
        out.append(Entry(sub, st, instructors.get(sub.grader_id), len(ids), left,
                         score.total if score else None, score.max if score else None))
    out.sort(key=order)
    return out


def order(entry: Entry) -> tuple:
    """The queue's order: by roster id, then submission."""
    return entry.student.username, entry.submission.id


def neighbours(entries: list[Entry], current: Entry) -> tuple[Entry | None, Entry | None, int | None]:
    """The entries before and after `current` in the queue, and its place (1-based; None once it left the queue,
    e.g. just graded under "needs grading": then its neighbours are where it would be)."""
    key = order(current)
    before = [e for e in entries if order(e) < key]
    after = [e for e in entries if order(e) > key]
    inside = any(e.id == current.id for e in entries)
    return (before[-1] if before else None, after[0] if after else None, len(before) + 1 if inside else None)


def entry_for(s: Session, sub: Submission) -> Entry:
    """The queue entry of one submission, whatever the filters."""
    ids = manual_ids(s, sub.assignment)
    score = coursework.current_scores(s, [sub.id]).get(sub.id, (None, None))[1]
    grader = s.get(Instructor, sub.grader_id) if sub.grader_id else None
    return Entry(sub, sub.student, grader, len(ids), items_left(ids, sub.manual),
                 score.total if score else None, score.max if score else None)


def assign(s: Session, assignment: Assignment, submission_ids: list[int] | None,
           usernames: list[str] | None) -> dict[int, str | None]:
    """Give submissions to graders, round robin over `usernames` in the order given (None or []: unassign).

    submission_ids None: every counted submission that needs grading and has no grader yet.
    Returns submission id -> the grader's username (None: unassigned).
    """
    people = [find_grader(s, name) for name in dict.fromkeys(usernames or [])]
    if submission_ids is None:
        if not people:
            raise StoreError("name at least one grader to give the unassigned submissions to")
        subs = [e.submission for e in queue(s, assignment, "needs", "unassigned")]
    else:
        if not isinstance(submission_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                           for i in submission_ids):
            raise StoreError("submissions must be a list of submission ids")
        subs = list(s.scalars(select(Submission).where(Submission.id.in_(submission_ids),
                                                       Submission.assignment_id == assignment.id)
                              .order_by(Submission.id)))
        missing = sorted(set(submission_ids) - {sub.id for sub in subs})
        if missing:
            raise NotFound(f"no submission {', '.join(map(str, missing))} in assignment {assignment.slug!r}")
    out = {}
    for n, sub in enumerate(subs):
        person = people[n % len(people)] if people else None
        sub.grader_id = person.id if person else None
        out[sub.id] = person.username if person else None
    s.flush()
    return out


# ---------------------------------------------------------------- the source and comments on its lines

def source_lines(sub: Submission) -> list[str]:
    """The submitted file's lines, numbered from 1 as Python's tracebacks number them."""
    text = sub.content.decode("utf-8", "replace")
    lines = LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it starts none
    return lines


def comments_of(s: Session, sub: Submission) -> list[tuple[LineComment, str]]:
    """The submission's line comments by line, oldest first, each with its author's username ('-': removed)."""
    q = (select(LineComment, Instructor.username).outerjoin(Instructor, Instructor.id == LineComment.instructor_id)
         .where(LineComment.submission_id == sub.id).order_by(LineComment.line, LineComment.id))
    return [(row, name or "-") for row, name in s.execute(q).all()]


def source_view(s: Session, sub: Submission) -> list[dict]:
    """Each line with its number and its comments: what the source views show."""
    by_line: dict[int, list] = {}
    for row, name in comments_of(s, sub):
        by_line.setdefault(row.line, []).append({"id": row.id, "text": row.text, "by": name,
                                                 "at": row.created_at})
    return [{"number": n, "text": text, "comments": by_line.get(n, [])}
            for n, text in enumerate(source_lines(sub), start=1)]


def add_comment(s: Session, sub: Submission, line, text, instructor: Instructor | None) -> LineComment:
    """A comment on one line of the submission's file; StoreError names a line out of range or an empty text."""
    count = len(source_lines(sub))
    if isinstance(line, str) and line.strip().isdigit():
        line = int(line.strip())
    if isinstance(line, bool) or not isinstance(line, int) or not 1 <= line <= count:
        raise StoreError(f"line must be a line number from 1 to {count} (the file's lines), not {line!r}")
    text = str(text or "").strip()
    if not text:
        raise StoreError(f"the comment on line {line} is empty")
    if len(text) > COMMENT_MAX:
        raise StoreError(f"the comment is {len(text)} characters; at most {COMMENT_MAX}")
    row = LineComment(submission_id=sub.id, line=line, text=text, instructor_id=instructor.id if instructor else None)
    s.add(row)
    s.flush()
    return row


def delete_comment(s: Session, sub: Submission, comment_id: int) -> LineComment:
    """Remove one comment of the submission; NotFound if it is not one of its comments."""
    row = s.get(LineComment, comment_id)
    if row is None or row.submission_id != sub.id:
        raise NotFound(f"no comment {comment_id} on submission {sub.id}")
    s.delete(row)
    s.flush()
    return row


# ---------------------------------------------------------------- the dashboard's marks

def marks(s: Session, rows: list[dict]) -> dict[int, dict]:
    """For dashboard rows (coursework.submission_rows): submission id -> {"counted", "items", "left"}: whether it
    is the one that counts, and how many of its rubric's manual items are left to grade."""
    assignments = {r["submission"].assignment_id: r["submission"].assignment for r in rows}
    ids, counts = {}, set()
    for aid, a in assignments.items():
        ids[aid] = manual_ids(s, a)
        counts |= {sub.id for sub in counted(s, a).values()}
    return {r["id"]: {"counted": r["id"] in counts, "items": len(ids[r["submission"].assignment_id]),
                      "left": len(items_left(ids[r["submission"].assignment_id], r["submission"].manual))}
            for r in rows}
