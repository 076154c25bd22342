"""API tokens: random secrets shown once, stored as sha256; instructor tokens and per-student tokens."""
import hashlib
import secrets
from dataclasses import dataclass
from functools import wraps

from flask import g, request
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from .models import Student, Token, utcnow

PREFIX = "gr_"
ROLES = ("instructor", "student")


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
    plain = PREFIX + secrets.token_urlsafe(32)
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


class AuthError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def require(*roles):
    """View decorator: a valid token (of one of `roles`, when given); sets g.principal."""
    def decorate(view):
        @wraps(view)
        def wrapper(*args, **kwargs):
            from .db import session
            plain = bearer_token()
            if plain is None:
                raise AuthError(401, "missing token: send 'Authorization: Bearer <token>'")
            principal = authenticate(session(), plain)
            if principal is None:
                raise AuthError(401, "unknown or revoked token")
            if roles and principal.role not in roles:
                raise AuthError(403, f"this needs a {' or '.join(roles)} token")
            g.principal = principal
            return view(*args, **kwargs)
        return wrapper
    return decorate
