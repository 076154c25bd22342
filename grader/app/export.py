"""The gradebook as exported (CSV and JSON, the instructor page and the API): coursework.gradebook's rows with each
student's e-mail and roster state, and the counted submission's late penalty as a fraction and in points.

One function for every way out, so the page's CSV, the API's CSV and JSON, and `grader export` carry the same columns.
"""
from sqlalchemy import select
from sqlalchemy.orm import Session

from . import accounts, coursework
from .models import Assignment, Student


def gradebook_rows(s: Session, assignment: Assignment) -> list[dict]:
    """A row per student on the roster (removed students are not), with email, state and late_penalty."""
    rows = coursework.gradebook(s, assignment)
    students = {st.username: st for st in s.scalars(select(Student).where(
        Student.username.in_([r["student"] for r in rows])))} if rows else {}
    out = []
    for row in rows:
        st = students.get(row["student"])
        if st is not None and st.removed_at is not None:
            continue  # off the roster, off the gradebook (their submissions stay on their pages)
        out.append({**row, "name": row.get("name", st.name if st else ""), "email": st.email if st else "",
                    "state": accounts.student_state(st) if st else "active",
                    "late_penalty": late_penalty(row.get("score"))})
    return out


def late_penalty(score: dict | None) -> dict | None:
    """{"fraction", "points"} the counted submission lost for lateness (zeros when on time), None without a score."""
    if not score:
        return None
    taken = score.get("late_penalty") or {}
    return {"fraction": float(taken.get("fraction", 0.0)), "points": float(taken.get("points", 0.0))}
