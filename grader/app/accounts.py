"""Who may do what: the roster's students, instructor accounts, API tokens, and signing in with either.

Plain functions over a session, for the API, the pages and the CLI. Tokens are random secrets shown once and
stored as sha256; instructor passwords only as salted hashes (werkzeug scrypt).
"""
import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from ..roster import student_problems
from .models import Instructor, Student, Token, utcnow
from .store import Conflict, NotFound, StoreError

TOKEN_PREFIX = "gr_"
ROLES = ("instructor", "student")
MIN_PASSWORD = 10
# Compared against when the username is unknown, so a wrong name costs the same time as a wrong password.
_DUMMY_HASH = generate_password_hash("not a password of anyone's")


# ---------------------------------------------------------------- the roster

STATES = ("active", "deactivated", "removed")


class Inactive(StoreError):
    """A deactivated or removed student's token, sign-in or upload: refused, saying why (403)."""
    status = 403


def add_student(s: Session, username: str, name: str = "", email: str = "") -> Student:
    """Put a student on the roster; the fields are checked as a roster file's are (grader.roster)."""
    username, name, email = (username or "").strip(), (name or "").strip(), (email or "").strip()
    problems = student_problems(username, name, email)
    if problems:
        raise StoreError("; ".join(problems))
    existing = s.scalar(select(Student).where(Student.username == username))
    if existing is not None and existing.removed_at is not None:
        raise Conflict(f"student {username!r} was removed from the roster; reactivate them to bring them back "
                       f"(their submissions were kept)")
    if existing is not None:
        raise Conflict(f"student {username!r} is already on the roster")
    student = Student(username=username, name=name, email=email)
    s.add(student)
    s.flush()
    return student


def get_student(s: Session, username: str) -> Student:
    """A student by roster id, removed ones too (instructors still see their submissions)."""
    student = s.scalar(select(Student).where(Student.username == username))
    if student is None:
        raise NotFound(f"no student {username!r} on the roster")
    return student


def list_students(s: Session, removed: bool = False) -> list[Student]:
    """The roster: active and deactivated students; removed ones only when asked."""
    query = select(Student).order_by(Student.username)
    if not removed:
        query = query.where(Student.removed_at.is_(None))
    return list(s.scalars(query))


def student_state(student: Student) -> str:
    """active, deactivated or removed (removal wins: a removed student is off the roster either way)."""
    if student.removed_at is not None:
        return "removed"
    return "deactivated" if student.deactivated_at is not None else "active"


def inactive_reason(username: str, deactivated_at, removed_at) -> str | None:
    """What a student who may not sign in or upload is told, or None for an active student."""
    if removed_at is not None:
        return f"the account {username} has been removed from the roster: ask your instructor"
    if deactivated_at is not None:
        return f"the account {username} is deactivated: no sign-in or upload until your instructor reactivates it"
    return None


def require_active(student: Student) -> Student:
    """The student, if they may sign in and upload; Inactive otherwise."""
    reason = inactive_reason(student.username, student.deactivated_at, student.removed_at)
    if reason:
        raise Inactive(reason)
    return student


def revoke_student_tokens(s: Session, student: Student) -> int:
    """Revoke every active token of the student; how many there were."""
    now, n = utcnow(), 0
    for row in s.scalars(select(Token).where(Token.student_id == student.id, Token.revoked_at.is_(None))):
        row.revoked_at, n = now, n + 1
    return n


def deactivate_student(s: Session, username: str) -> Student:
    """No sign-in or upload (their tokens are kept, refused while deactivated); still on the roster and gradebook."""
    student = get_student(s, username)
    if student.removed_at is not None:
        raise Conflict(f"student {username!r} was removed from the roster; reactivate them first")
    if student.deactivated_at is None:
        student.deactivated_at = utcnow()
    s.flush()
    return student


def reactivate_student(s: Session, username: str) -> Student:
    """Undo a deactivation or a removal. A removed student's tokens stay revoked: rotate to give them a new one."""
    student = get_student(s, username)
    student.deactivated_at = student.removed_at = None
    s.flush()
    return student


def remove_student(s: Session, username: str) -> tuple[Student, int]:
    """Off the roster and the gradebook, every token revoked; the submissions are kept. (student, tokens revoked)"""
    student = get_student(s, username)
    if student.removed_at is None:
        student.removed_at = utcnow()
    revoked = revoke_student_tokens(s, student)
    s.flush()
    return student, revoked


def rotate_token(s: Session, username: str, label: str = "rotated") -> tuple[Token, str, int]:
    """Revoke the student's active tokens and issue a new one: (the new row, its plain text shown once, revoked)."""
    student = get_student(s, username)
    if student.removed_at is not None:
        raise Conflict(f"student {username!r} was removed from the roster; reactivate them first")
    revoked = revoke_student_tokens(s, student)
    row, plain = issue_token(s, "student", student, label=label)
    return row, plain, revoked


def import_roster(s: Session, rows: list[dict], tokens: bool = True, reissue: bool = False) -> list[dict]:
    """Add the students of parsed roster rows (grader.roster.parse_roster) that are not on the roster yet.

    With tokens, each new student is issued a token, shown once in the returned rows; with reissue too, students
    already on the roster get a new token and their earlier tokens are revoked.
    """
    out = []
    for row in rows:
        username = row["username"]
        try:
            student = get_student(s, username)
            new = False
        except NotFound:
            try:
                student = add_student(s, username, row.get("name") or "", row.get("email") or "")
            except StoreError as exc:
                raise StoreError(f"line {row['line']}: {exc.message}") from None
            new = True
        state = student_state(student)
        token = None
        if tokens and (new or reissue) and state != "removed":  # a removed student comes back only by reactivate
            if not new:
                revoke_student_tokens(s, student)
            token = issue_token(s, "student", student, label="roster import")[1]
        out.append({"username": username, "name": student.name, "new": new, "state": state, "token": token})
    s.flush()
    return out


# ---------------------------------------------------------------- tokens

@dataclass
class Principal:
    """Who is calling: an instructor, or one student."""
    role: str
    token_id: int
    student_id: int | None = None
    username: str | None = None

    @property
    def is_instructor(self) -> bool:
        return self.role == "instructor"


def hash_token(token: str) -> str:
    """The stored form: a token is 256 random bits, so a plain sha256 cannot be brute-forced."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(s: Session, role: str, student: Student | None = None, label: str = "") -> tuple[Token, str]:
    """A new token; the plain text is returned once and never stored."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    if (role == "student") != (student is not None):
        raise ValueError("a student token names its student; an instructor token names none")
    if student is not None and student.removed_at is not None:  # every way to a token: API, page, CLI, import
        raise Conflict(f"student {student.username!r} was removed from the roster; reactivate them first")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = Token(token_hash=hash_token(plain), role=role, student_id=student.id if student else None, label=label)
    s.add(row)
    s.flush()
    return row, plain


def revoke_token(s: Session, token_id: int) -> bool:
    row = s.get(Token, token_id)
    if row is None or row.revoked_at is not None:
        return False
    row.revoked_at = utcnow()
    return True


def list_tokens(s: Session) -> list[Token]:
    return list(s.scalars(select(Token).order_by(Token.id)))


def token_active(s: Session, token_id: int) -> bool:
    """Still valid: a revoked token, or a deactivated or removed student, signs its browser sessions out too."""
    return s.scalar(select(Token.id).outerjoin(Student, Student.id == Token.student_id)
                    .where(Token.id == token_id, Token.revoked_at.is_(None), Student.deactivated_at.is_(None),
                           Student.removed_at.is_(None))) is not None


# Built once (every request runs it): the token with this hash, whether it is revoked, its student and their state.
BY_HASH = (select(Token.id, Token.role, Token.revoked_at, Token.student_id, Student.username,
                  Student.deactivated_at, Student.removed_at)
           .outerjoin(Student, Student.id == Token.student_id)
           .where(Token.token_hash == bindparam("token_hash")))


def authenticate(s: Session, plain: str) -> Principal | None:
    """The principal for a token, or None if it is unknown or revoked: one indexed lookup by hash.

    A deactivated student's token, or a removed student's (revoked at removal), raises Inactive: its owner is told
    why instead of "unknown or revoked token".
    """
    row = s.execute(BY_HASH, {"token_hash": hash_token(plain)}).first()
    if row is None or (row.revoked_at is not None and row.removed_at is None):
        return None
    reason = inactive_reason(row.username, row.deactivated_at, row.removed_at) if row.student_id else None
    if reason:
        raise Inactive(reason)
    return None if row.revoked_at is not None else Principal(row.role, row.id, row.student_id, row.username)


def authenticate_student(s: Session, username: str, token: str) -> Principal | None:
    """The student principal when `token` is an active student token of `username` (their roster id)."""
    principal = authenticate(s, (token or "").strip())
    if principal is None or principal.role != "student" or principal.username != (username or "").strip():
        return None
    return principal


# ---------------------------------------------------------------- instructor accounts

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
