"""Plain functions over a session for the pages: instructors, sign-in, reports, manual grades, releases, rate limits,
the dashboard's rows and the class's score distribution. The service's own rules stay in store.py; these call it."""
import csv
import hashlib
import io
from datetime import timedelta

from sqlalchemy import and_, delete, func, select
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from . import scoring, store
from .auth import Principal, authenticate, issue_token
from .files import clean_filename
from .models import Assignment, Result, Score, Student, Submission, Token, utcnow
from .models import Instructor, ManualGrade, RateEvent, Release, Report
from .store import Conflict, NotFound, StoreError

MIN_PASSWORD = 10
# Compared against when the username is unknown, so a wrong name costs the same time as a wrong password.
_DUMMY_HASH = generate_password_hash("not a password of anyone's")
REPORT_KINDS = {".pdf": "pdf", ".md": "markdown", ".markdown": "markdown", ".txt": "markdown"}
SORTS = ("submitted", "student", "status", "score")


# ---------------------------------------------------------------- instructors

def create_instructor(s: Session, username: str, password: str, name: str = "") -> Instructor:
    """A new instructor account; the password is kept only as a salted hash."""
    username = (username or "").strip()
    if not username or len(username) > 64 or any(c.isspace() for c in username):
        raise StoreError("username must be 1-64 characters without spaces")
    if len(password or "") < MIN_PASSWORD:
        raise StoreError(f"the password must be at least {MIN_PASSWORD} characters")
    if s.scalar(select(Instructor).where(Instructor.username == username)):
        raise Conflict(f"instructor {username!r} already exists")
    row = Instructor(username=username, name=name or "", password_hash=generate_password_hash(password))
    s.add(row)
    s.flush()
    return row


def set_instructor_password(s: Session, username: str, password: str) -> Instructor:
    if len(password or "") < MIN_PASSWORD:
        raise StoreError(f"the password must be at least {MIN_PASSWORD} characters")
    row = s.scalar(select(Instructor).where(Instructor.username == username))
    if row is None:
        raise NotFound(f"no instructor {username!r}")
    row.password_hash = generate_password_hash(password)
    s.flush()
    return row


def authenticate_instructor(s: Session, username: str, password: str) -> Instructor | None:
    """The active instructor with this username and password, else None (in about the same time either way)."""
    row = s.scalar(select(Instructor).where(Instructor.username == (username or "").strip()))
    ok = check_password_hash(row.password_hash if row else _DUMMY_HASH, password or "")
    return row if ok and row is not None and row.disabled_at is None else None


def active_instructor(s: Session, instructor_id: int) -> Instructor | None:
    row = s.get(Instructor, instructor_id)
    return row if row is not None and row.disabled_at is None else None


# ---------------------------------------------------------------- students

def authenticate_student(s: Session, username: str, token: str) -> Principal | None:
    """The student principal when `token` is an active student token of `username` (their roster id)."""
    principal = authenticate(s, (token or "").strip())
    if principal is None or principal.role != "student" or principal.username != (username or "").strip():
        return None
    return principal


def token_active(s: Session, token_id: int) -> bool:
    """Still valid: a revoked token signs its browser sessions out too."""
    return s.scalar(select(Token.id).where(Token.id == token_id, Token.revoked_at.is_(None))) is not None


def import_roster(s: Session, text: str, reissue: bool = False) -> list[dict]:
    """Add the students of a CSV (username[,name,email]) and issue each new one a token, shown once.

    With reissue, students already on the roster get a new token and their earlier tokens are revoked.
    """
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in reader.fieldnames or []]
    if "username" not in fields:
        raise StoreError("the CSV needs a header row with a 'username' column (optionally 'name' and 'email')")
    reader.fieldnames = fields
    rows, seen = [], set()
    for line, row in enumerate(reader, start=2):
        username = (row.get("username") or "").strip()
        if not username:
            continue
        if username in seen:
            raise StoreError(f"line {line}: {username!r} appears twice")
        seen.add(username)
        try:
            student = store.get_student(s, username)
            new = False
        except NotFound:
            try:
                student = store.add_student(s, username, (row.get("name") or "").strip(),
                                            (row.get("email") or "").strip())
            except StoreError as exc:
                raise StoreError(f"line {line}: {exc.message}") from None
            new = True
        token = None
        if new or reissue:
            if not new:
                for old in s.scalars(select(Token).where(Token.student_id == student.id, Token.revoked_at.is_(None))):
                    old.revoked_at = utcnow()
            token = issue_token(s, "student", student, label="roster import")[1]
        rows.append({"username": username, "name": student.name, "new": new, "token": token})
    s.flush()
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
    """Check and record manual grades {item id: {"points", "comment"}}, keep who gave them, and rescore."""
    rubric = scoring.current_rubric()
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
    row = store.set_manual(s, sub, clean)
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
    """Item and category ids released to the assignment's students."""
    return set(s.scalars(select(Release.key).where(Release.assignment_id == assignment.id)))


def set_releases(s: Session, assignment: Assignment, keys, instructor: Instructor | None) -> set[str]:
    """Make exactly `keys` (item or category ids of the rubric) released for the assignment."""
    rubric = scoring.current_rubric()
    known = {c.id for c in rubric.categories} | {i.id for _, i in rubric.items()} if rubric else set()
    keys = set(keys)
    unknown = sorted(keys - known)
    if unknown:
        raise StoreError(f"not in the rubric: {', '.join(unknown)}")
    current = {r.key: r for r in s.scalars(select(Release).where(Release.assignment_id == assignment.id))}
    for key in set(current) - keys:
        s.delete(current[key])
    for key in keys - set(current):
        s.add(Release(assignment_id=assignment.id, key=key, instructor_id=instructor.id if instructor else None))
    s.flush()
    return keys


def student_score(s: Session, sub: Submission, scored: dict | None, released: set | None = None) -> dict | None:
    """What the student may see of a score: hidden items only once released for the assignment."""
    if scored is None:
        return None
    rubric = scoring.current_rubric()
    if rubric is None:
        return None
    from rubric import student_view
    return student_view(scored, rubric, released_keys(s, sub.assignment) if released is None else released)


# ---------------------------------------------------------------- rate limits

def rate_limited(s: Session, key: str, limit: int, window_s: float) -> float | None:
    """Seconds until `key` may act again when it already acted `limit` times in the window, else None."""
    now = utcnow()
    since = now - timedelta(seconds=window_s)
    times = list(s.scalars(select(RateEvent.at).where(RateEvent.key == key, RateEvent.at > since)
                           .order_by(RateEvent.at)))
    if limit <= 0 or len(times) < limit:
        return None
    return max(1.0, (times[-limit] + timedelta(seconds=window_s) - now).total_seconds())


def record_event(s: Session, key: str, keep_s: float = 86400.0) -> None:
    """Count one action under `key`, and forget this key's actions older than keep_s."""
    now = utcnow()
    s.execute(delete(RateEvent).where(RateEvent.key == key, RateEvent.at < now - timedelta(seconds=keep_s)))
    s.add(RateEvent(key=key, at=now))
    s.flush()


def clear_events(s: Session, key: str) -> None:
    s.execute(delete(RateEvent).where(RateEvent.key == key))


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
            for row in s.scalars(select(Score).where(Score.result_id.in_(list(by_result))).order_by(Score.id)):
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
           "status": lambda r: (store_status_order(r["status"]), r["id"]),
           "score": lambda r: (r["total"] is not None, r["total"] or 0.0, r["id"])}[sort if sort in SORTS else "submitted"]
    rows.sort(key=key, reverse=descending)
    if sort == "score" and not descending:  # ungraded rows last either way
        rows.sort(key=lambda r: r["total"] is None)
    return rows[:limit]


def store_status_order(status: str) -> int:
    order = ("queued", "running", "done", "failed")
    return order.index(status) if status in order else len(order)


def distribution(s: Session, assignment: Assignment) -> dict:
    """Per category and for the total: the points of each student's counted submission (the rubric policy)."""
    rows = [r for r in store.gradebook(s, assignment) if r["score"]]
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


def regrade_latest(s: Session, assignment: Assignment) -> list[Submission]:
    """Queue every student's latest submission that is done or failed again (as the API's regrade-all)."""
    subs = [sub for sub in store.latest_submissions(s, assignment).values() if sub.status in ("done", "failed")]
    for sub in subs:
        store.request_regrade(s, sub)
    return subs
