"""The tables: assignments with their rubrics, rules and extensions, the roster, tokens, submissions, grading
attempts, results and their scores; instructor accounts, uploaded reports, manual-grade history, line comments,
feedback visibility, releases and rate events."""
from datetime import datetime, timezone

from sqlalchemy import (JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, LargeBinary, MetaData, String, Text,
                        UniqueConstraint, false)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, query_expression, relationship

# Named constraints, so Alembic can alter them on every backend (SQLite batch mode needs the names).
NAMING = {"ix": "ix_%(column_0_label)s", "uq": "uq_%(table_name)s_%(column_0_N_name)s",
          "ck": "ck_%(table_name)s_%(constraint_name)s",
          "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
          "pk": "pk_%(table_name)s"}
Json = JSON().with_variant(JSONB(), "postgresql")
SUBMISSION_STATUSES = ("queued", "running", "done", "failed")  # failed: infrastructure gave up; never a student's failure
# draft: instructors only; open: students see it and upload (from opens_at); closed: students see it, no uploads;
# archived: kept for the record, hidden from students and from the instructor's default lists.
ASSIGNMENT_STATES = ("draft", "open", "closed", "archived")
# What a student sees of a rubric item's result: nothing, its points, points and the check's verdict line, or all of it.
FEEDBACK_LEVELS = ("hidden", "points", "summary", "full")


def utcnow() -> datetime:
    """Naive UTC (the same on SQLite and PostgreSQL, comparable in SQL)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class RubricVersion(Base):
    """A rubric file as loaded, kept whole so an assignment's scores always come from the text it was pinned to."""
    __tablename__ = "rubrics"
    id: Mapped[int] = mapped_column(primary_key=True)
    version: Mapped[str] = mapped_column(String(64))  # the file's `version`
    digest: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 of the text: the same file is one row
    title: Mapped[str] = mapped_column(String(200), default="")
    filename: Mapped[str] = mapped_column(String(255), default="")
    text: Mapped[str] = mapped_column(Text)
    instructor_id: Mapped[int | None] = mapped_column(ForeignKey("instructors.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Assignment(Base):
    """What is graded and how: which checks, the seed (never shown to students) and the limits; and the course
    rules: its pinned rubric, state, dates and policy overrides (a rule absent from `rules` is the rubric's)."""
    __tablename__ = "assignments"
    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200), default="")
    track: Mapped[str | None] = mapped_column(String(16))  # None: either track
    checks: Mapped[list] = mapped_column(Json, default=list)  # empty: every check, as `grader check`
    seed: Mapped[int | None] = mapped_column(Integer)  # None: the judge's default, as `grader check`
    limits: Mapped[dict] = mapped_column(Json, default=dict)  # Limits fields, e.g. {"stage_s": 20}
    rubric_id: Mapped[int | None] = mapped_column(ForeignKey("rubrics.id"))  # None: the packaged rubric
    state: Mapped[str] = mapped_column(String(16), default="open")  # ASSIGNMENT_STATES
    opens_at: Mapped[datetime | None] = mapped_column(DateTime)  # naive UTC; None: open as soon as the state is
    due_at: Mapped[datetime | None] = mapped_column(DateTime)  # naive UTC; None: the rubric policy's deadline
    # Overrides of the rubric's [policy]: grace_minutes, late_penalty_per_day, late_penalty_max,
    # attempts_per_period, period, timezone, counts (best | latest | chosen)
    rules: Mapped[dict] = mapped_column(Json, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    rubric: Mapped[RubricVersion | None] = relationship()


class Student(Base):
    """One person on the roster."""
    __tablename__ = "students"
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # Deactivated: cannot sign in or upload, still on the roster. Removed: off the roster and the gradebook.
    # Either way their submissions are kept.
    deactivated_at: Mapped[datetime | None] = mapped_column(DateTime)
    removed_at: Mapped[datetime | None] = mapped_column(DateTime)


class Extension(Base):
    """One student's own rules for an assignment: a later due date, extra attempts, or both."""
    __tablename__ = "extensions"
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"), index=True)
    student_id: Mapped[int] = mapped_column(ForeignKey("students.id"), index=True)
    due_at: Mapped[datetime | None] = mapped_column(DateTime)  # naive UTC; None: the assignment's
    extra_attempts: Mapped[int] = mapped_column(Integer, default=0)  # added to every period's limit
    reason: Mapped[str] = mapped_column(Text, default="")
    instructor_id: Mapped[int | None] = mapped_column(ForeignKey("instructors.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    __table_args__ = (UniqueConstraint("assignment_id", "student_id"),)


class Token(Base):
    """An API token, stored only as its sha256: instructor tokens, or one student's."""
    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))  # instructor | student
    student_id: Mapped[int | None] = mapped_column(ForeignKey("students.id"))
    label: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)
    student: Mapped[Student | None] = relationship()


class Submission(Base):
    """One uploaded file and where its grading stands; the store, not the broker, is the truth."""
    __tablename__ = "submissions"
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id"), index=True)
    student_id: Mapped[int] = mapped_column(ForeignKey("students.id"), index=True)
    filename: Mapped[str] = mapped_column(String(255))
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(Integer)
    # At most 256 KiB, kept in the database so every worker host can read it. Deferred: loaded only where the file
    # itself is needed (grading, downloads), never by the status polls and listings.
    content: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    track: Mapped[str | None] = mapped_column(String(16))
    same_as: Mapped[int | None] = mapped_column(ForeignKey("submissions.id"))  # an earlier identical upload
    status: Mapped[str] = mapped_column(String(16), default="queued")
    request: Mapped[int] = mapped_column(Integer, default=1)  # grading request: 1, then one more per regrade
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # claims of the current request
    claim: Mapped[str | None] = mapped_column(String(36))  # the running attempt's fencing token
    worker: Mapped[str | None] = mapped_column(String(200))
    current_check: Mapped[str | None] = mapped_column(String(64))
    # While running: the verdicts the judge decided so far (check result dicts, contract order), written with the
    # heartbeat; None once the result is stored (the result is the truth) and at every new claim or release
    partial: Mapped[list | None] = mapped_column(Json)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)
    task_id: Mapped[str | None] = mapped_column(String(64))
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime)
    not_before: Mapped[datetime | None] = mapped_column(DateTime)  # a retry's backoff: the sweeper waits
    error: Mapped[str | None] = mapped_column(Text)  # the last infrastructure error (instructors only)
    manual: Mapped[dict | None] = mapped_column(Json)  # the instructor's points for manual rubric items
    chosen_at: Mapped[datetime | None] = mapped_column(DateTime)  # the student chose this one to count ("chosen")
    grader_id: Mapped[int | None] = mapped_column(ForeignKey("instructors.id"))  # who grades its manual items
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    assignment: Mapped[Assignment] = relationship()
    student: Mapped[Student] = relationship()
    # Queued submissions ahead of this one, when the query that loaded it asked (store.STATUS_LOAD); else None.
    queued_ahead: Mapped[int | None] = query_expression()

    __table_args__ = (Index("ix_submissions_status_enqueued", "status", "enqueued_at"),)


class Attempt(Base):
    """One claim of a submission by a worker, and how it ended: the redelivery evidence."""
    __tablename__ = "attempts"
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), index=True)
    request: Mapped[int] = mapped_column(Integer)
    number: Mapped[int] = mapped_column(Integer)  # 1, 2, ... within the request
    claim: Mapped[str] = mapped_column(String(36), unique=True)
    worker: Mapped[str] = mapped_column(String(200), default="")
    task_id: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    outcome: Mapped[str | None] = mapped_column(String(16))  # graded | retry | failed | lost | superseded
    message: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (UniqueConstraint("submission_id", "request", "number"),)


class Result(Base):
    """The judge's report for one grading request: raw check results, metrics, environment, timings."""
    __tablename__ = "results"
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), index=True)
    request: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    report: Mapped[dict] = mapped_column(Json)
    options: Mapped[dict] = mapped_column(Json, default=dict)  # checks, seed, limits used (seed: instructors only)
    grader_version: Mapped[str] = mapped_column(String(32), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    scores: Mapped[list["Score"]] = relationship(back_populates="result", cascade="all, delete-orphan")

    # Exactly once: one result per submission per grading request, whatever the broker delivers.
    __table_args__ = (UniqueConstraint("submission_id", "request"),)


class Score(Base):
    """Points for a result under one rubric version; recomputed from the stored result, never by re-running."""
    __tablename__ = "scores"
    id: Mapped[int] = mapped_column(primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("results.id"), index=True)
    rubric_version: Mapped[str] = mapped_column(String(64))
    total: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)
    score: Mapped[dict] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    result: Mapped[Result] = relationship(back_populates="scores")

    __table_args__ = (UniqueConstraint("result_id", "rubric_version"),)


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


class LineComment(Base):
    """A grader's comment on one line of a submitted file, shown to the student with the source."""
    __tablename__ = "line_comments"
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    line: Mapped[int] = mapped_column(Integer)  # 1-based
    text: Mapped[str] = mapped_column(Text)
    instructor_id: Mapped[int | None] = mapped_column(ForeignKey("instructors.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class FeedbackRule(Base):
    """What students of an assignment see of one rubric item (or a whole category, by its id): a level now, and
    optionally another from a date on (e.g. "points" until the due date, then "full")."""
    __tablename__ = "feedback_rules"
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(64))  # an item id or a category id
    level: Mapped[str] = mapped_column(String(16))  # FEEDBACK_LEVELS
    later_level: Mapped[str | None] = mapped_column(String(16))
    switch_at: Mapped[datetime | None] = mapped_column(DateTime)  # naive UTC: later_level from then on
    # later_level from the assignment's due date, whatever it is by then (switch_at: the due date when saved, kept
    # for an assignment whose due date is later removed)
    switch_at_due: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    instructor_id: Mapped[int | None] = mapped_column(ForeignKey("instructors.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    __table_args__ = (UniqueConstraint("assignment_id", "key"),)


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
