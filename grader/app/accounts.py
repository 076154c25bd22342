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

from .models import Instructor, Student, Token, utcnow
from .store import Conflict, NotFound, StoreError

TOKEN_PREFIX = "gr_"
ROLES = ("instructor", "student")
MIN_PASSWORD = 10
# Compared against when the username is unknown, so a wrong name costs the same time as a wrong password.
_DUMMY_HASH = generate_password_hash("not a password of anyone's")


# ---------------------------------------------------------------- the roster

def add_student(s: Session, username: str, name: str = "", email: str = "") -> Student:
    """Put a student on the roster."""
    if not username or len(username) > 64:
        raise StoreError("username must be 1-64 characters")
    if s.scalar(select(Student).where(Student.username == username)):
        raise Conflict(f"student {username!r} is already on the roster")
    student = Student(username=username, name=name or "", email=email or "")
    s.add(student)
    s.flush()
    return student


def get_student(s: Session, username: str) -> Student:
    student = s.scalar(select(Student).where(Student.username == username))
    if student is None:
        raise NotFound(f"no student {username!r} on the roster")
    return student


def list_students(s: Session) -> list[Student]:
    return list(s.scalars(select(Student).order_by(Student.username)))


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
        token = None
        if tokens and (new or reissue):
            if not new:
                for old in s.scalars(select(Token).where(Token.student_id == student.id, Token.revoked_at.is_(None))):
                    old.revoked_at = utcnow()
            token = issue_token(s, "student", student, label="roster import")[1]
        out.append({"username": username, "name": student.name, "new": new, "token": token})
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
    """Still valid: a revoked token signs its browser sessions out too."""
    return s.scalar(select(Token.id).where(Token.id == token_id, Token.revoked_at.is_(None))) is not None


# Built once (every request runs it): the active token with this hash, and its student's username.
BY_HASH = (select(Token.id, Token.role, Token.student_id, Student.username)
           .outerjoin(Student, Student.id == Token.student_id)
           .where(Token.token_hash == bindparam("token_hash"), Token.revoked_at.is_(None)))


def authenticate(s: Session, plain: str) -> Principal | None:
    """The principal for a token, or None if it is unknown or revoked: one indexed lookup by hash."""
    row = s.execute(BY_HASH, {"token_hash": hash_token(plain)}).first()
    if row is None:
        return None
    return Principal(row.role, row.id, row.student_id, row.username)


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
