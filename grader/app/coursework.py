"""Coursework over a session: scores, the student's reports, manual grades, releases, the gradebook and the
instructor dashboard's rows and score distribution.

A score is a function of stored data only (the judge's report, the manual grades, the upload time): rescoring
never runs student code. The rubric itself is reached through scoring.py, and the rubric package is imported
where it is used, as there (without it, results are stored unscored).
"""
import hashlib

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from . import accounts, scoring, store
from .files import clean_filename
from .models import Assignment, Instructor, ManualGrade, Report, Result, Score, Student, Submission, utcnow
from .store import StoreError

REPORT_KINDS = {".pdf": "pdf", ".md": "markdown", ".markdown": "markdown", ".txt": "markdown"}
SORTS = ("submitted", "student", "status", "score")


# ---------------------------------------------------------------- scores

def score_of(s: Session, result: Result, rubric_version: str | None = None) -> Score | None:
    """The score under rubric_version (default: the newest one stored for the result)."""
    q = select(Score).where(Score.result_id == result.id)
    if rubric_version is not None:
        q = q.where(Score.rubric_version == rubric_version)
    # Newest by when it was computed: a rescore under a rubric pinned again updates its older row in place.
    return s.scalar(q.order_by(Score.created_at.desc(), Score.id.desc()).limit(1))


def score_result(s: Session, result: Result, rubric=None, stored: list | None = None, rules=None) -> Score | None:
    """Compute and store (or replace) the result's score under its assignment's rubric and rules (the student's
    extension included); None without a rubric.

    The score is a function of stored data only: the report, the manual grades and the upload time (late penalty).
    stored: the result's Score rows, oldest first, when the caller loaded them (rescore: one query for all, and
    one flush at the end). rules: the submission's rules.rules_for, when the caller has them.
    """
    sub = s.get(Submission, result.submission_id)
    if rules is None:
        from .rules import rules_for
        rules = rules_for(s, sub.assignment, sub.student)
    scored = scoring.compute(result.report, sub.manual, rubric, submitted_at=sub.created_at, rules=rules)
    if scored is None:
        return None
    version = str(scored.get("rubric_version"))
    if stored is None:
        row = score_of(s, result, version)
    else:
        row = next((r for r in reversed(stored) if r.rubric_version == version), None)
    if row is None:
        row = Score(result_id=result.id, rubric_version=version)
        s.add(row)
    row.score, row.total, row.max, row.created_at = scored, float(scored["total"]), float(scored["max"]), utcnow()
    if stored is None:
        s.flush()
    return row


def scores_by_result(s: Session, result_ids: list[int]) -> dict[int, list[Score]]:
    """Every stored Score of these results, oldest first, in a few queries (not one per result)."""
    found: dict[int, list[Score]] = {}
    for start in range(0, len(result_ids), 500):  # bounded IN lists
        chunk = result_ids[start:start + 500]
        q = select(Score).where(Score.result_id.in_(chunk)).order_by(Score.created_at, Score.id)
        for row in s.scalars(q):
            found.setdefault(row.result_id, []).append(row)
    return found


def set_manual(s: Session, sub: Submission, grades: dict) -> Score | None:
    """Record the instructor's grades for manual rubric items, {item id: {"points", "comment"}}; rescore."""
    if not isinstance(grades, dict) or not all(isinstance(v, dict) and "points" in v for v in grades.values()):
        raise StoreError('manual grades are an object {item id: {"points": number, "comment": text}}')
    sub.manual = {**(sub.manual or {}), **grades}
    s.flush()
    result = store.latest_result(s, sub)
    return score_result(s, result) if result else None


def rescore(s: Session, assignment: Assignment | None = None, student: Student | None = None) -> dict:
    """Recompute every stored result's score with its assignment's rubric and rules (no student code runs); the
    packaged rubric file is read again first."""
    from .rules import rules_for
    packaged = scoring.reload_rubric()
    if packaged is None:
        raise StoreError("the rubric package is not available", 503)
    q = select(Result, Submission).join(Submission, Submission.id == Result.submission_id)
    if assignment is not None:
        q = q.where(Submission.assignment_id == assignment.id)
    if student is not None:
        q = q.where(Submission.student_id == student.id)
    rows = s.execute(q.order_by(Result.id)).all()
    stored = scores_by_result(s, [result.id for result, _ in rows])
    changed, count, rules_of = [], 0, {}
    for result, sub in rows:
        key = (sub.assignment_id, sub.student_id)
        if key not in rules_of:  # one rules_for per student and assignment, not per result
            rules_of[key] = rules_for(s, sub.assignment, sub.student)
        mine = stored.get(result.id, [])
        # What the newest score said, read before it may be updated in place (same rubric version).
        before = (mine[-1].total, mine[-1].rubric_version, mine[-1].score) if mine else None
        after = score_result(s, result, stored=mine, rules=rules_of[key])
        count += 1
        if before is not None and (before[0] != after.total or before[1] != after.rubric_version):
            changed.append({"submission": sub.id, "request": result.request, "before": before[0],
                            "after": after.total, "rubric_before": before[1],
                            "diff": scoring.diff(before[2], after.score)})
    s.flush()
    rubric = rules_for(s, assignment).rubric if assignment is not None else packaged
    return {"rubric_version": str(rubric.version), "rescored": count, "changed": changed}


def gradebook(s: Session, assignment: Assignment) -> list[dict]:
    """A row per roster student (removed students are off it): the submission that counts under the assignment's
    rules (best, latest or chosen: rules.counted_submissions) and its current score."""
    from .rules import counted_submissions
    counted = counted_submissions(s, assignment)
    totals = dict(s.execute(select(Submission.student_id, func.count()).where(
        Submission.assignment_id == assignment.id).group_by(Submission.student_id)).all())
    scores = current_scores(s, [sub.id for sub in counted.values()])
    rows = []
    for student in accounts.list_students(s):
        if student.removed_at is not None:
            continue
        sub = counted.get(student.id)
        row = scores.get(sub.id, (None, None))[1] if sub is not None else None
        rows.append({"student": student.username, "name": student.name, "submissions": totals.get(student.id, 0),
                     "submission": sub.id if sub else None, "submitted_at": sub.created_at if sub else None,
                     "status": sub.status if sub else None, "sha256": sub.sha256 if sub else None,
                     "score": row.score if row else None})
    return rows


# ---------------------------------------------------------------- reports

def validate_report(data: bytes, filename: str, max_bytes: int) -> str:
    """The report's kind (pdf or markdown); StoreError names what is wrong with it."""
    name = (filename or "").lower()
    kind = next((k for ext, k in REPORT_KINDS.items() if name.endswith(ext)), None)
    if kind is None:
        raise StoreError(f"the report {filename!r} must be a PDF (.pdf) or Markdown (.md) file")
    if not data:
        raise StoreError("the report file is empty")
    if len(data) > max_bytes:
        raise StoreError(f"the report is {len(data)} bytes; the limit is {max_bytes // (1 << 20)} MiB")
    if kind == "pdf" and not data.startswith(b"%PDF-"):
        raise StoreError(f"{filename!r} is not a PDF file (it does not start with %PDF-)")
    if kind == "markdown":
        if b"\x00" in data:
            raise StoreError(f"{filename!r} is binary, not Markdown text")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StoreError(f"{filename!r} is not UTF-8 text (invalid byte at offset {exc.start})") from None
    return kind


def attach_report(s: Session, sub: Submission, data: bytes, filename: str, kind: str) -> Report:
    """Store the report with the submission, replacing an earlier one of the same submission."""
    row = report_of(s, sub) or Report(submission_id=sub.id)
    row.filename = clean_filename(filename, "report")
    row.kind, row.size, row.content = kind, len(data), data
    row.sha256, row.created_at = hashlib.sha256(data).hexdigest(), utcnow()
    s.add(row)
    s.flush()
    return row


def report_of(s: Session, sub: Submission) -> Report | None:
    return s.scalar(select(Report).where(Report.submission_id == sub.id))


def submissions_with_reports(s: Session, ids) -> set[int]:
    ids = list(ids)
    return set(s.scalars(select(Report.submission_id).where(Report.submission_id.in_(ids)))) if ids else set()


# ---------------------------------------------------------------- manual grades and releases

def manual_items(rubric) -> list:
    """(category, item) for every manual item of the rubric, in rubric order."""
    return [(cat, item) for cat, item in rubric.items() if item.kind == "manual"] if rubric else []


def grade_manual(s: Session, sub: Submission, grades: dict, instructor: Instructor | None):
    """Check and record manual grades {item id: {"points", "comment"}} against the manual items of the submission's
    assignment's rubric, keep who gave them, and rescore."""
    from .rules import rubric_for
    rubric = rubric_for(s, sub.assignment)
    if rubric is None:
        raise StoreError("the rubric is not available, so there is nothing to grade by hand", 503)
    items = {item.id: item for _, item in manual_items(rubric)}
    clean = {}
    for item_id, grade in grades.items():
        item = items.get(item_id)
        if item is None:
            raise StoreError(f"{item_id!r} is not a manual item of rubric {rubric.version}")
        points = grade.get("points")
        if not isinstance(points, (int, float)) or isinstance(points, bool) or not 0 <= points <= item.points:
            raise StoreError(f"{item.title}: points must be a number from 0 to {item.points:g}")
        clean[item_id] = {"points": float(points), "comment": str(grade.get("comment") or "").strip()}
    if not clean:
        raise StoreError("no points given: fill in at least one item")
    row = set_manual(s, sub, clean)
    for item_id, grade in clean.items():
        s.add(ManualGrade(submission_id=sub.id, item_id=item_id, points=grade["points"], comment=grade["comment"],
                          instructor_id=instructor.id if instructor else None))
    s.flush()
    return row


def manual_history(s: Session, sub: Submission) -> list[tuple[ManualGrade, str]]:
    """Every manual grade given to the submission, newest first, with the instructor's username."""
    q = (select(ManualGrade, Instructor.username).outerjoin(Instructor, Instructor.id == ManualGrade.instructor_id)
         .where(ManualGrade.submission_id == sub.id).order_by(ManualGrade.id.desc()))
    return [(row, name or "-") for row, name in s.execute(q).all()]


def released_keys(s: Session, assignment: Assignment) -> set[str]:
    """Item and category ids students of the assignment see in full now (a release is a level "full")."""
    from .visibility import current_due, level_now, stored_rules
    stored = stored_rules(s, assignment)
    due = current_due(s, assignment, stored)
    return {key for key, rule in stored.items() if level_now(rule, due=due) == "full"}


def set_releases(s: Session, assignment: Assignment, keys, instructor: Instructor | None) -> set[str]:
    """Make exactly `keys` (item or category ids of the rubric) released, i.e. at level "full", for the assignment:
    a key no longer listed that was released goes back to the rubric's default; other levels are left alone."""
    from .visibility import clear_rule, known_keys, rubric_of, set_rule, stored_rules
    known = known_keys(rubric_of(s, assignment))
    keys = set(keys)
    unknown = sorted(keys - set(known))
    if unknown:
        raise StoreError(f"not in the rubric: {', '.join(unknown)}")
    current = stored_rules(s, assignment)
    for key, rule in current.items():
        if key not in keys and rule.level == "full" and not rule.later_level:
            clear_rule(s, assignment, key)
    for key in keys:
        rule = current.get(key)
        if rule is None or rule.level != "full" or rule.later_level or rule.id is None:  # None: a Release row
            set_rule(s, assignment, key, "full", instructor=instructor)
    s.flush()
    return keys


def student_score(s: Session, sub: Submission, scored: dict | None, vis=None) -> dict | None:
    """What the student may see of a score under the assignment's feedback levels (visibility.py)."""
    from . import visibility
    if scored is None:
        return None
    vis = vis or visibility.levels(s, sub.assignment)
    return visibility.student_score(scored, visibility.rubric_of(s, sub.assignment), vis)


def previous_score(s: Session, sub: Submission, result: Result, for_student: bool,
                   vis=None) -> dict | None:
    """The grading request before `result` and its score as the caller may see it (None for a first grading).

    {"request", "total", "max", "score", "scored"}: "scored" says whether that request has a stored score at all.
    """
    if result.request <= 1:
        return None
    earlier = [r for r in store.results_of(s, sub) if r.request < result.request]
    if not earlier:
        return None
    row = score_of(s, earlier[-1])
    shown = row.score if row else None
    if for_student:
        shown = student_score(s, sub, shown, vis)
    return {"request": earlier[-1].request, "total": shown["total"] if shown else None,
            "max": shown["max"] if shown else None, "score": shown, "scored": row is not None}


# ---------------------------------------------------------------- the dashboard

def current_scores(s: Session, ids) -> dict[int, tuple[Result, Score | None]]:
    """submission id -> (its latest result, that result's newest score), in a few queries for any number of ids."""
    ids, out = list(ids), {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        newest = (select(Result.submission_id, func.max(Result.request).label("request"))
                  .where(Result.submission_id.in_(chunk)).group_by(Result.submission_id).subquery())
        results = s.scalars(select(Result).join(newest, and_(Result.submission_id == newest.c.submission_id,
                                                             Result.request == newest.c.request)))
        by_result = {r.id: r for r in results}
        scores = {}
        if by_result:
            for row in s.scalars(select(Score).where(Score.result_id.in_(list(by_result)))
                                 .order_by(Score.created_at, Score.id)):
                scores[row.result_id] = row  # the newest wins
        out.update({r.submission_id: (r, scores.get(r.id)) for r in by_result.values()})
    return out


def submission_rows(s: Session, assignment: Assignment | None = None, student: str | None = None,
                    status: str | None = None, student_id: int | None = None, min_score: float | None = None, max_score: float | None = None,
                    sort: str = "submitted", descending: bool = True, limit: int = 500) -> list[dict]:
    """The dashboard: one row per submission with its current score, filtered and sorted."""
    q = (select(Submission, Student.username, Student.name, Assignment.slug)
         .join(Student, Student.id == Submission.student_id).join(Assignment, Assignment.id == Submission.assignment_id))
    if assignment is not None:
        q = q.where(Submission.assignment_id == assignment.id)
    if student:
        pattern = "%" + student.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        q = q.where(Student.username.ilike(pattern, escape="\\") | Student.name.ilike(pattern, escape="\\"))
    if student_id is not None:
        q = q.where(Submission.student_id == student_id)
    if status:
        q = q.where(Submission.status == status)
    found = s.execute(q.order_by(Submission.id.desc())).all()
    scores = current_scores(s, [sub.id for sub, *_ in found])
    reports = submissions_with_reports(s, [sub.id for sub, *_ in found])
    rows = []
    for sub, username, name, slug in found:
        result, score = scores.get(sub.id, (None, None))
        total = score.total if score else None
        if min_score is not None and (total is None or total < min_score):
            continue
        if max_score is not None and (total is None or total > max_score):
            continue
        rows.append({"submission": sub, "id": sub.id, "student": username, "name": name, "assignment": slug,
                     "status": sub.status, "created_at": sub.created_at, "total": total,
                     "max": score.max if score else None, "score": score.score if score else None,
                     "pending": len(score.score.get("pending_manual", [])) if score else None,
                     "result": result, "report": sub.id in reports, "request": sub.request})
    key = {"submitted": lambda r: r["id"], "student": lambda r: (r["student"], r["id"]),
           "status": lambda r: (status_order(r["status"]), r["id"]),
           "score": lambda r: (r["total"] is not None, r["total"] or 0.0, r["id"])}[sort if sort in SORTS else "submitted"]
    rows.sort(key=key, reverse=descending)
    if sort == "score" and not descending:  # ungraded rows last either way
        rows.sort(key=lambda r: r["total"] is None)
    return rows[:limit]


def status_order(status: str) -> int:
    order = ("queued", "running", "done", "failed")
    return order.index(status) if status in order else len(order)


def distribution(s: Session, assignment: Assignment) -> dict:
    """Per category and for the total: the points of each student's counted submission (the rubric policy)."""
    rows = [r for r in gradebook(s, assignment) if r["score"]]
    out = {"students": len(rows), "total": {"title": "Total", "max": None, "values": []}, "categories": []}
    by_id = {}
    for r in rows:
        out["total"]["values"].append(r["score"]["total"])
        out["total"]["max"] = r["score"]["max"]
        for cat in r["score"]["categories"]:
            entry = by_id.setdefault(cat["id"], {"id": cat["id"], "title": cat["title"], "max": cat["max"],
                                                 "values": []})
            entry["values"].append(cat["points"])
    out["categories"] = list(by_id.values())
    return out
