"""The grading state machine: exactly once, because the store decides, not the broker.

A job message only says "look at submission N". `claim` moves N from queued (or running with a dead
heartbeat) to running with a fresh fencing token in one conditional UPDATE; only the holder of that
token may `heartbeat`, `finish` or `release`, and results are unique per (submission, grading request).
A message for a submission that is done, or running with a live heartbeat, changes nothing. `sweep`
finds what the broker lost. See docs/service.md.
"""
import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, undefer

from .models import Attempt, Result, Submission, utcnow
from .store import new_task_id

log = logging.getLogger(__name__)
BACKOFF_CAP_S = 300.0


def mark_sent(s: Session, submission_id: int) -> str:
    """A new task id and send time for a queued submission about to be (re)sent; returns the task id."""
    task_id = new_task_id()
    s.execute(update(Submission).where(Submission.id == submission_id, Submission.status == "queued")
              .values(task_id=task_id, enqueued_at=utcnow()))
    return task_id


@dataclass
class Claim:
    """A worker's hold on one grading request; `token` fences every later write."""
    submission_id: int
    token: str
    request: int
    number: int
    filename: str
    content: bytes
    assignment: dict = field(default_factory=dict)


@dataclass
class Skip:
    """Why a job message changed nothing."""
    reason: str  # missing | done | failed | busy | gave_up


def claim(s: Session, submission_id: int, worker: str, task_id: str | None, lease_s: float,
          max_attempts: int) -> Claim | Skip:
    """queued (or running with a heartbeat older than lease_s) -> running, atomically; else Skip."""
    now = utcnow()
    stale = now - timedelta(seconds=lease_s)
    claimable = or_(Submission.status == "queued",
                    and_(Submission.status == "running", Submission.heartbeat_at < stale))
    token = str(uuid.uuid4())
    res = s.execute(update(Submission)
                    .where(Submission.id == submission_id, claimable, Submission.attempts < max_attempts)
                    .values(status="running", claim=token, attempts=Submission.attempts + 1, worker=worker,
                            heartbeat_at=now, started_at=now, current_check=None, partial=None, not_before=None)
                    .execution_options(synchronize_session=False))
    if res.rowcount != 1:
        s.rollback()
        return _why_not(s, submission_id, max_attempts, claimable)
    sub = s.get(Submission, submission_id, populate_existing=True, options=[undefer(Submission.content)])
    # An earlier attempt of this request that never finished was lost (its worker died or stalled).
    s.execute(update(Attempt).where(Attempt.submission_id == submission_id, Attempt.request == sub.request,
                                    Attempt.outcome.is_(None))
              .values(outcome="lost", finished_at=now, message="no heartbeat: the worker died or stalled"))
    s.add(Attempt(submission_id=submission_id, request=sub.request, number=sub.attempts, claim=token,
                  worker=worker, task_id=task_id, started_at=now))
    a = sub.assignment
    s.commit()
    return Claim(submission_id, token, sub.request, sub.attempts, sub.filename, sub.content,
                 {"slug": a.slug, "checks": list(a.checks or []), "seed": a.seed, "limits": dict(a.limits or {})})


def _why_not(s: Session, submission_id: int, max_attempts: int, claimable) -> Skip:
    """Skip for a message that may not grade; a claimable submission out of attempts becomes failed."""
    sub = s.get(Submission, submission_id, populate_existing=True)
    if sub is None:
        return Skip("missing")
    if sub.status in ("done", "failed"):
        return Skip(sub.status)
    if sub.attempts >= max_attempts:
        res = s.execute(update(Submission).where(Submission.id == submission_id, claimable,
                                                 Submission.attempts >= max_attempts)
                        .values(status="failed", claim=None, current_check=None, partial=None, finished_at=utcnow(),
                                error=f"gave up after {sub.attempts} attempts: {sub.error or 'workers were lost'}")
                        .execution_options(synchronize_session=False))
        s.execute(update(Attempt).where(Attempt.submission_id == submission_id, Attempt.outcome.is_(None))
                  .values(outcome="lost", finished_at=utcnow()))
        s.commit()
        if res.rowcount == 1:
            return Skip("gave_up")
    return Skip("busy")


def heartbeat(s: Session, c: Claim, current_check: str | None, partial: list | None = None) -> bool:
    """Refresh the claim's heartbeat and current check, and the verdicts decided so far when given (only when they
    changed: most beats write no JSON); False if the claim was taken over."""
    values = dict(heartbeat_at=utcnow(), current_check=current_check)
    if partial is not None:
        values["partial"] = partial
    res = s.execute(update(Submission).where(Submission.id == c.submission_id, Submission.claim == c.token)
                    .values(**values).execution_options(synchronize_session=False))
    s.commit()
    return res.rowcount == 1


def finish(s: Session, c: Claim, report: dict, options: dict, grader_version: str,
           before_commit=None) -> Result | None:
    """Store the result and mark done, only while the claim holds; None if another attempt superseded it.
    before_commit(s, result): more for the same transaction (the worker's score)."""
    now = utcnow()
    res = s.execute(update(Submission)
                    .where(Submission.id == c.submission_id, Submission.claim == c.token,
                           Submission.status == "running")
                    .values(status="done", claim=None, current_check=None, partial=None, finished_at=now, error=None)
                    .execution_options(synchronize_session=False))
    if res.rowcount != 1:
        s.rollback()
        _close_attempt(s, c, "superseded", "another attempt took this grading over")
        s.commit()
        return None
    result = Result(submission_id=c.submission_id, request=c.request, attempt=c.number, report=report,
                    options=options, grader_version=grader_version, created_at=now)
    s.add(result)
    try:
        s.flush()
    except IntegrityError:  # the unique (submission, request): this request has its result already
        s.rollback()
        s.execute(update(Submission).where(Submission.id == c.submission_id, Submission.claim == c.token)
                  .values(status="done", claim=None, current_check=None, partial=None, finished_at=now)
                  .execution_options(synchronize_session=False))
        _close_attempt(s, c, "superseded", "a result for this request was already stored")
        s.commit()
        return None
    _close_attempt(s, c, "graded", None)
    if before_commit is not None:
        before_commit(s, result)
    s.commit()
    return result


def release(s: Session, c: Claim, message: str, retry_in_s: float | None, max_attempts: int) -> str:
    """An infrastructure failure: back to queued for a retry after retry_in_s, or failed when out of attempts."""
    attempts = s.scalar(select(Submission.attempts).where(Submission.id == c.submission_id))
    now = utcnow()
    if retry_in_s is None or attempts is None or attempts >= max_attempts:
        values = dict(status="failed", finished_at=now, error=f"gave up after {attempts} attempt(s): {message}")
        outcome = "failed"
    else:
        values = dict(status="queued", not_before=now + timedelta(seconds=retry_in_s), error=message)
        outcome = "retry"
    res = s.execute(update(Submission).where(Submission.id == c.submission_id, Submission.claim == c.token)
                    .values(claim=None, current_check=None, partial=None, **values)
                    .execution_options(synchronize_session=False))
    if res.rowcount != 1:
        s.rollback()
        outcome = "superseded"
    _close_attempt(s, c, outcome, message)
    s.commit()
    return outcome


def _close_attempt(s: Session, c: Claim, outcome: str, message: str | None) -> None:
    s.execute(update(Attempt).where(Attempt.claim == c.token).values(outcome=outcome, message=message,
                                                                     finished_at=utcnow()))


def backoff_s(attempt: int, first_s: float) -> float:
    """first_s, doubling per attempt, at most BACKOFF_CAP_S."""
    return min(BACKOFF_CAP_S, first_s * 2 ** max(0, attempt - 1))


def sweep(s: Session, lease_s: float, requeue_after_s: float, in_broker: set | None,
          max_attempts: int) -> list[tuple[int, str]]:
    """Find lost jobs and return (submission id, new task id) to send again.

    Lost: running with a heartbeat older than lease_s (the worker died: sent again at once, since its old
    message may sit unacknowledged in the broker for a long time), or queued, past its backoff, sent more
    than requeue_after_s ago and not in the broker (Redis restarted, or sending failed). in_broker holds the
    task ids the broker has (queued, or delivered recently), or is None when unknown (then age alone decides).
    """
    now = utcnow()
    stale = now - timedelta(seconds=lease_s)
    resend = []
    for sid, attempts in s.execute(select(Submission.id, Submission.attempts).where(
            Submission.status == "running", Submission.heartbeat_at < stale)).all():
        values = dict(status="queued", claim=None, current_check=None, partial=None, task_id=new_task_id(),
                      enqueued_at=now)
        if attempts >= max_attempts:
            values = dict(status="failed", claim=None, current_check=None, partial=None, finished_at=now,
                          error=f"gave up after {attempts} attempts: workers were lost")
        res = s.execute(update(Submission).where(Submission.id == sid, Submission.status == "running",
                                                 Submission.heartbeat_at < stale).values(**values)
                        .execution_options(synchronize_session=False))
        if res.rowcount:
            s.execute(update(Attempt).where(Attempt.submission_id == sid, Attempt.outcome.is_(None))
                      .values(outcome="lost", finished_at=now, message="no heartbeat: found by the sweeper"))
            if values["status"] == "queued":
                resend.append((sid, values["task_id"]))
            log.warning("submission %s: worker lost (no heartbeat since before %s); %s", sid, stale,
                        "given up" if values["status"] == "failed" else "queued again")
    old = now - timedelta(seconds=requeue_after_s)
    rows = s.execute(select(Submission.id, Submission.task_id).where(
        Submission.status == "queued", func.coalesce(Submission.enqueued_at, Submission.created_at) < old,
        or_(Submission.not_before.is_(None), Submission.not_before <= now)).order_by(Submission.enqueued_at))
    for sid, task_id in rows.all():
        if in_broker is not None and task_id in in_broker:
            continue
        resend.append((sid, mark_sent(s, sid)))
    s.commit()
    return resend
