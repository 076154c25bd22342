"""Course policy: attempts per period, the late penalty, and which submission counts. Pure functions of times."""
import math
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .model import COUNTS, PERIODS, Policy
from .points import round_points
from .problems import unknown_keys

POLICY_KEYS = {"attempts_per_period", "period", "timezone", "deadline", "grace_minutes", "late_penalty_per_day",
               "late_penalty_max", "counts"}
DAY = timedelta(days=1)


def parse_policy(doc: dict, report) -> Policy:
    """The [policy] table as a Policy; report(message, key) receives each problem."""
    for msg in unknown_keys(doc, POLICY_KEYS, "[policy]"):
        report(msg)

    def fraction(key, default):
        value = doc.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            report(f'"{key}" must be a fraction from 0 to 1 (0.1 = 10%), not {value!r}', key)
            return default
        return float(value)

    attempts = doc.get("attempts_per_period", 0)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
        report(f'"attempts_per_period" must be a whole number (0 = unlimited), not {attempts!r}', "attempts_per_period")
        attempts = 0
    period = doc.get("period", "day")
    if period not in PERIODS:
        report(f'"period" must be one of {", ".join(PERIODS)}, not {period!r}', "period")
        period = "day"
    tz = doc.get("timezone", "UTC")
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        report(f'"timezone" must be an IANA name such as "Europe/Berlin" or "UTC", not {tz!r}', "timezone")
        tz, zone = "UTC", ZoneInfo("UTC")
    deadline = doc.get("deadline")
    if deadline is not None:
        try:
            deadline = aware(deadline, zone)
        except (TypeError, ValueError) as exc:
            report(f'"deadline" {exc}', "deadline")
            deadline = None
    grace = doc.get("grace_minutes", 0)
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 <= grace < 100_000:
        report(f'"grace_minutes" must be a number of minutes (0 or more), not {grace!r}', "grace_minutes")
        grace = 0
    counts = doc.get("counts", "best")
    if counts not in COUNTS:
        report(f'"counts" must be "best" or "last", not {counts!r}', "counts")
        counts = "best"
    return Policy(attempts=attempts, period=period, timezone=tz, deadline=deadline, grace_minutes=float(grace),
                  late_per_day=fraction("late_penalty_per_day", 0.0), late_max=fraction("late_penalty_max", 1.0),
                  counts=counts)


def aware(value, zone=timezone.utc) -> datetime:
    """A timezone-aware datetime from a datetime or ISO 8601 string; naive values are taken to be in `zone`."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"must be an ISO 8601 date and time such as 2026-12-12T23:59:00+01:00, "
                             f"not {value!r}") from None
    if isinstance(value, date) and not isinstance(value, datetime):
        raise ValueError(f"needs a time of day too, e.g. {value.isoformat()}T23:59:00, not the date alone")
    if not isinstance(value, datetime):
        raise TypeError(f"must be a date and time, not {value!r}")
    return value if value.tzinfo else value.replace(tzinfo=zone)


def late_penalty(submitted_at, policy: Policy) -> float:
    """The fraction of the score lost: late_per_day for each started day after deadline + grace, at most late_max."""
    if policy.deadline is None or policy.late_per_day == 0:
        return 0.0
    late = aware(submitted_at) - policy.deadline - timedelta(minutes=policy.grace_minutes)
    if late <= timedelta(0):
        return 0.0
    days = math.ceil(late / DAY)
    return min(policy.late_max, round(days * policy.late_per_day, 12))  # round: 3 * 0.1 is 0.30000000000000004


def apply_late_penalty(score: dict, fraction: float) -> dict:
    """A copy of a score dict with the penalty taken off its total (applying it again replaces it, never stacks)."""
    raw, decimals = score.get("total_before_penalty", score["total"]), score.get("decimals", 2)
    points = round_points(raw * fraction, decimals)
    return {**score, "total_before_penalty": raw, "late_penalty": {"fraction": fraction, "points": points},
            "total": round_points(raw - points, decimals)}


def counted_submission(submissions, policy: Policy):
    """The submission that counts: the latest ("last"), or the highest total, the later one on a tie ("best").

    Each submission is a mapping with "submitted_at" and "score" (a score dict, or None while it is graded);
    "best" skips submissions without a score, "last" does not (the latest one counts even while pending).
    """
    subs = list(submissions)
    if policy.counts == "best":
        subs = [s for s in subs if s.get("score")]
        return max(subs, key=lambda s: (s["score"]["total"], aware(s["submitted_at"])), default=None)
    return max(subs, key=lambda s: aware(s["submitted_at"]), default=None)


def period_key(moment, policy: Policy):
    """Which attempt period a moment falls in: its local date, its ISO week, or the one term."""
    local = aware(moment).astimezone(ZoneInfo(policy.timezone))
    if policy.period == "day":
        return local.date()
    if policy.period == "week":
        return tuple(local.isocalendar())[:2]
    return "term"


def attempts_used(submitted, now, policy: Policy) -> int:
    """How many of the student's submission times fall in the same period as now."""
    key = period_key(now, policy)
    return sum(1 for t in submitted if period_key(t, policy) == key)


def attempts_left(submitted, now, policy: Policy) -> int | None:
    """Attempts the student still has in this period; None when attempts are unlimited."""
    if policy.attempts == 0:
        return None
    return max(0, policy.attempts - attempts_used(submitted, now, policy))


def next_period_starts(now, policy: Policy) -> datetime | None:
    """When the attempt count resets (next local midnight, or next Monday); None for a per-term limit."""
    zone = ZoneInfo(policy.timezone)
    local = aware(now).astimezone(zone)
    if policy.period == "term":
        return None
    days = 1 if policy.period == "day" else 7 - local.weekday()
    return datetime.combine(local.date() + timedelta(days=days), time(0), tzinfo=zone)
