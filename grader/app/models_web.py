"""What the web pages add to the store: instructor accounts, uploaded reports, manual-grade history, releases, rate events.

Same declarative Base as models.py, so one metadata (and one Alembic history) covers both.
"""
from datetime import datetime

from sqlalchemy import DateTime, Float, ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow


class Instructor(Base):
    """An instructor's sign-in for the pages; the password is stored only as a salted hash (werkzeug scrypt)."""
    __tablename__ = "instructors"
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime)


class Report(Base):
    """The student's written report (PDF or Markdown) for the manual rubric items; one per submission."""
    __tablename__ = "reports"
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), unique=True)
    filename: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))  # pdf | markdown
    size: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ManualGrade(Base):
    """Who gave which manual points and comment, when: the history behind Submission.manual (the current grades)."""
    __tablename__ = "manual_grades"
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    item_id: Mapped[str] = mapped_column(String(64))
    points: Mapped[float] = mapped_column(Float)
    instructor_id: Mapped[int | None] = mapped_column(ForeignKey("instructors.id"))
    comment: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Release(Base):
    """A hidden rubric item (or a whole category, by its id) that students of an assignment may now see."""
    __tablename__ = "releases"
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(64))  # an item id or a category id
    instructor_id: Mapped[int | None] = mapped_column(ForeignKey("instructors.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    __table_args__ = (UniqueConstraint("assignment_id", "key"),)


class RateEvent(Base):
    """One counted action (an upload, a failed sign-in) under a key such as 'upload:student:7'; old rows are pruned."""
    __tablename__ = "rate_events"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(128))
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    __table_args__ = (Index("ix_rate_events_key_at", "key", "at"),)
