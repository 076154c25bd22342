"""An assignment's course rules in force: its pinned rubric's [policy], the assignment's own overrides and dates,
and one student's extension; what an upload at a moment loses; and which submission counts for each student.

Every scoring path with a submission goes through here, so a score, a page and the API agree on the rules.
Times in the store are naive UTC; the Rules hold aware UTC datetimes.
"""
import math
from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from . import scoring
from .models import Assignment, Extension, Result, Score, Student, Submission, utcnow

COUNTS = ("best", "latest", "chosen")
PERIODS = ("day", "week", "term")
# The overrides Assignment.rules may hold, as the rubric's [policy] names them.
RULE_KEYS = ("grace_minutes", "late_penalty_per_day", "late_penalty_max", "attempts_per_period", "period",
             "timezone", "counts")
DAY = timedelta(days=1)


@dataclass(frozen=True)
class Rules:
    """An assignment's rules, for one student (extension applied) or the class."""
    state: str  # draft | open | closed | archived
    opens_at: datetime | None  # aware UTC
    due_at: datetime | None  # aware UTC: the assignment's, or the rubric policy's deadline
    extended_until: datetime | None  # this student's extension, aware UTC, or None
    grace_minutes: float
    late_per_day: float  # fraction per started day late
    late_max: float
    attempts: int  # per period, 0 = unlimited (includes the student's extra attempts)
    period: str  # day | week | term
    timezone: str
    counts: str  # best | latest | chosen
    rubric: object  # rubric.Rubric: the assignment's pinned rubric (or the packaged one); None without the package
    extra_attempts: int = 0  # the student's extension's share of `attempts`

    @property
    def deadline(self) -> datetime | None:
        """The moment lateness is counted from: the student's extension, else the due date."""
        return self.extended_until or self.due_at


def utc(value: datetime | None) -> datetime | None:
    """Aware UTC from a stored naive-UTC (or an aware) datetime."""
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def naive(value: datetime | None) -> datetime | None:
    """The store's naive UTC from an aware datetime."""
    if value is None:
        return None
    return value.astimezone(timezone.utc).replace(tzinfo=None) if value.tzinfo else value


def rubric_for(s: Session, assignment: Assignment):
    """The assignment's pinned rubric (parsed once per stored text), or the packaged one when none is pinned."""
    if assignment.rubric_id is None:
        return scoring.current_rubric()
    from . import rubrics
    return rubrics.loaded(rubrics.get_rubric_version(s, assignment.rubric_id))  # by id: the relationship may be stale


def extension_of(s: Session, assignment: Assignment, student: Student | None) -> Extension | None:
    if student is None or assignment.id is None:
        return None
    return s.scalar(select(Extension).where(Extension.assignment_id == assignment.id,
                                            Extension.student_id == student.id))


def rules_for(s: Session, assignment: Assignment, student: Student | None = None) -> Rules:
    """The rules in force: the rubric's [policy], overridden by the assignment's own, with the student's extension."""
    rubric = rubric_for(s, assignment)
    policy = rubric.policy if rubric is not None else None
    own = dict(assignment.rules or {})

    def rule(key, attr, default):
        return own[key] if own.get(key) is not None else getattr(policy, attr, default)

    counts = rule("counts", "counts", "best")
    attempts = int(rule("attempts_per_period", "attempts", 0))
    ext = extension_of(s, assignment, student)
    extra = ext.extra_attempts if ext is not None else 0
    return Rules(state=assignment.state or "open", opens_at=utc(assignment.opens_at),
                 due_at=utc(assignment.due_at) if assignment.due_at else utc(getattr(policy, "deadline", None)),
                 extended_until=utc(ext.due_at) if ext is not None and ext.due_at else None,
                 grace_minutes=float(rule("grace_minutes", "grace_minutes", 0.0)),
                 late_per_day=float(rule("late_penalty_per_day", "late_per_day", 0.0)),
                 late_max=float(rule("late_penalty_max", "late_max", 1.0)),
                 attempts=attempts + extra if attempts else 0, period=rule("period", "period", "day"),
                 timezone=rule("timezone", "timezone", "UTC"), counts="latest" if counts == "last" else counts,
                 rubric=rubric, extra_attempts=extra)


# ---------------------------------------------------------------- settings, checked

def parse_moment(value, name: str) -> datetime | None:
    """A date and time WITH its time zone (ISO 8601 text or an aware datetime) as the store's naive UTC; None stays
    None. A time without a zone is refused: "23:59" in whose time zone would be a guess."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{name} must be an ISO 8601 date and time with its zone, such as "
                             f"2026-12-18T23:59:00Z or 2026-12-18T23:59:00+01:00, not {value!r}") from None
    if not isinstance(value, datetime):
        raise ValueError(f"{name} must be a date and time with its zone, not {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} {value.isoformat()} has no time zone: add Z for UTC or an offset such as +01:00")
    return naive(value)


def clean_rule(key: str, value):
    """An override for Assignment.rules, checked (None removes it: the rubric's rule applies); ValueError names a
    bad one."""
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key == "grace_minutes":
        if not number or not 0 <= value < 100_000:
            raise ValueError(f"grace_minutes must be a number of minutes, 0 or more, not {value!r}")
        return float(value)
    if key in ("late_penalty_per_day", "late_penalty_max"):
        if not number or not 0 <= value <= 1:
            raise ValueError(f"{key} must be a fraction from 0 to 1 (0.1 = 10%), not {value!r}")
        return float(value)
    if key == "attempts_per_period":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"attempts_per_period must be a whole number, 0 = unlimited, not {value!r}")
        return value
    if key == "period":
        if value not in PERIODS:
            raise ValueError(f"period must be one of {', '.join(PERIODS)}, not {value!r}")
        return value
    if key == "timezone":
        try:
            ZoneInfo(str(value))
        except (ValueError, KeyError, OSError):
            raise ValueError(f'timezone must be an IANA name such as "Europe/Berlin" or "UTC", not {value!r}') from None
        return str(value)
    if key == "counts":
        value = "latest" if value == "last" else value  # a rubric file's "last" is the assignment's "latest"
        if value not in COUNTS:
            raise ValueError(f"counts must be one of {', '.join(COUNTS)}, not {value!r}")
        return value
    raise ValueError(f"unknown rule {key!r}; known: {', '.join(RULE_KEYS)}")


# ---------------------------------------------------------------- lateness

def late_fraction(rules: Rules, at: datetime) -> float:
    """What an upload at `at` (naive UTC ok) loses: late_per_day per started day after deadline + grace, at most
    late_max; nothing when there is no deadline or no penalty."""
    deadline = rules.deadline
    if deadline is None or not rules.late_per_day:
        return 0.0
    late = utc(at) - deadline - timedelta(minutes=rules.grace_minutes)
    if late <= timedelta(0):
        return 0.0
    return min(rules.late_max, round(math.ceil(late / DAY) * rules.late_per_day, 12))  # 3 * 0.1 is 0.30000000000000004


# ---------------------------------------------------------------- states and attempts

def upload_refusal(rules: Rules, now: datetime | None = None) -> tuple[int, str] | None:
    """(HTTP status, why) when a student may not upload now; None when they may."""
    now = utc(now or utcnow())
    if rules.state in ("draft", "archived"):
        return 404, "no such assignment"
    if rules.state == "closed":
        return 403, "this assignment is closed: it takes no more submissions"
    if rules.opens_at is not None and now < rules.opens_at:
        return 403, f"this assignment opens at {rules.opens_at.isoformat(timespec='minutes')}; upload from then on"
    return None


def period_key(moment: datetime, rules: Rules):
    """Which attempt period a moment falls in: its local date, its ISO week, or the one term."""
    local = utc(moment).astimezone(ZoneInfo(rules.timezone))
    if rules.period == "day":
        return local.date()
    if rules.period == "week":
        return tuple(local.isocalendar())[:2]
    return "term"


def next_period_starts(rules: Rules, now: datetime) -> datetime | None:
    """When the attempt count resets (next local midnight, or next Monday), aware UTC; None for a per-term limit."""
    if rules.period == "term":
        return None
    zone = ZoneInfo(rules.timezone)
    local = utc(now).astimezone(zone)
    days = 1 if rules.period == "day" else 7 - local.weekday()
    return datetime.combine(local.date() + timedelta(days=days), time(0), tzinfo=zone).astimezone(timezone.utc)


def attempts_status(s: Session, assignment: Assignment, student: Student, now: datetime | None = None,
                    rules: Rules | None = None) -> dict:
    """This student's attempts on this assignment in the current period: {"allowed" (0 = unlimited), "used",
    "left" (None = unlimited), "period", "resets_at" (aware UTC, None for a term)}."""
    rules = rules or rules_for(s, assignment, student)
    now = now or utcnow()
    times = s.scalars(select(Submission.created_at).where(Submission.assignment_id == assignment.id,
                                                          Submission.student_id == student.id))
    key = period_key(now, rules)
    used = sum(1 for t in times if period_key(t, rules) == key)
    return {"allowed": rules.attempts, "used": used, "period": rules.period,
            "left": max(0, rules.attempts - used) if rules.attempts else None,
            "resets_at": next_period_starts(rules, now)}


# ---------------------------------------------------------------- the submission that counts

def newest_scores(s: Session, subs) -> dict[int, Row]:
    """submission id -> the newest score of its latest result (the score shown everywhere), as rows of
    (result_id, total, created_at): only the columns choosing needs, never the reports or score documents."""
    ids, out = [sub.id for sub in subs], {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        latest: dict[int, int] = {}
        q = (select(Result.id, Result.submission_id).where(Result.submission_id.in_(chunk))
             .order_by(Result.request))
        for result_id, submission_id in s.execute(q):
            latest[submission_id] = result_id
        by_result = {rid: sid for sid, rid in latest.items()}
        if by_result:
            q = (select(Score.result_id, Score.total, Score.created_at).where(Score.result_id.in_(list(by_result)))
                 .order_by(Score.created_at, Score.id))
            for row in s.execute(q):
                out[by_result[row.result_id]] = row  # the newest wins
    return out


def pick(subs: list[Submission], counts: str, scores: dict[int, Score]) -> Submission | None:
    """One student's counted submission among theirs: best (highest total, the later one on a tie; unscored ones
    never count), latest (even while it is graded), or chosen (the newest mark, else the latest)."""
    if not subs:
        return None
    if counts == "best":
        scored = [sub for sub in subs if sub.id in scores]
        return max(scored, key=lambda sub: (scores[sub.id].total, sub.created_at, sub.id), default=None)
    if counts == "chosen":
        chosen = [sub for sub in subs if sub.chosen_at is not None]
        if chosen:
            return max(chosen, key=lambda sub: (sub.chosen_at, sub.id))
    return max(subs, key=lambda sub: (sub.created_at, sub.id))


def counted_submissions(s: Session, assignment: Assignment) -> dict[int, Submission]:
    """student id -> the submission that counts under the assignment's rules (best | latest | chosen)."""
    counts = rules_for(s, assignment).counts
    subs = list(s.scalars(select(Submission).where(Submission.assignment_id == assignment.id)
                          .order_by(Submission.id)))
    scores = newest_scores(s, subs) if counts == "best" else {}
    by_student: dict[int, list] = {}
    for sub in subs:
        by_student.setdefault(sub.student_id, []).append(sub)
    out = {sid: pick(mine, counts, scores) for sid, mine in by_student.items()}
    return {sid: sub for sid, sub in out.items() if sub is not None}


def counted_submission(s: Session, assignment: Assignment, student: Student) -> Submission | None:
    """The student's submission that counts, or None."""
    counts = rules_for(s, assignment).counts
    subs = list(s.scalars(select(Submission).where(Submission.assignment_id == assignment.id,
                                                   Submission.student_id == student.id).order_by(Submission.id)))
    return pick(subs, counts, newest_scores(s, subs) if counts == "best" else {})


def choose(s: Session, sub: Submission) -> Submission:
    """Mark the submission as the one that counts for its student (assignments that count the chosen one)."""
    from .store import Conflict
    rules = rules_for(s, sub.assignment)
    if rules.counts != "chosen":
        raise Conflict(f"assignment {sub.assignment.slug!r} counts your {rules.counts} submission; "
                       "choosing one is only for assignments that count the chosen submission")
    sub.chosen_at = utcnow()
    s.flush()
    return sub
