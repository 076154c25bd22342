"""An assignment's rules in words, as students read them: dates, the late policy, which submission counts, attempts.

Pure functions of a rules.Rules, the attempts left and the time, so the pages and the API say exactly the same.
"""
import math
from datetime import datetime, timedelta

from .rules import utc

DAY = timedelta(days=1)
COUNTS = {"best": "Your best submission counts.", "latest": "Your latest submission counts.",
          "chosen": "The submission you choose counts (until you choose one, your latest counts)."}
PERIOD_WORDS = {"day": "today", "week": "this week", "term": "for this assignment"}


def moment(value: datetime, now: datetime | None = None) -> str:
    """'Friday 18 Dec 23:59 UTC' (with the year when it is not now's year)."""
    value = utc(value)
    year = f" {value.year}" if now is None or utc(now).year != value.year else ""
    return f"{value:%A} {value.day} {value:%b}{year} {value:%H:%M} UTC"


def span(delta: timedelta) -> str:
    """A duration as a reader counts it: '3 days', '5 hours', '12 minutes' (rounded down, at least a minute)."""
    seconds = max(0.0, delta.total_seconds())
    if seconds >= 2 * 86400:
        n, unit = int(seconds // 86400), "day"
    elif seconds >= 3600:
        n, unit = int(seconds // 3600), "hour"
    else:
        n, unit = max(1, int(seconds // 60)), "minute"
    return f"{n} {unit}{'s' * (n != 1)}"


def percent(fraction: float) -> str:
    """0.1 -> '10%', 0.125 -> '12.5%'."""
    return f"{fraction * 100:.1f}".rstrip("0").rstrip(".") + "%"


def grace_words(minutes: float) -> str:
    n = f"{minutes:g}"
    return f"{n} minute{'s' * (minutes != 1)}"


def late_policy(rules) -> str | None:
    """What lateness costs, in one sentence; None when there is no deadline."""
    if rules.deadline is None:
        return None
    grace = f" (after {grace_words(rules.grace_minutes)} of grace)" if rules.grace_minutes else ""
    if not rules.late_per_day:
        return f"Late uploads are accepted without a penalty{grace}."
    cap = f", at most {percent(rules.late_max)}" if rules.late_max < 1 else ""
    return f"Late uploads lose {percent(rules.late_per_day)} of their score per started day late{grace}{cap}."


def dates(rules, now: datetime) -> str:
    """Where the assignment stands in time: opens, due (or extended), passed, closed."""
    now = utc(now)
    deadline, due = utc(rules.deadline), utc(rules.due_at)
    if rules.state == "draft":
        return "Not published yet: students cannot see or submit to it."
    if rules.state in ("closed", "archived"):
        closed = f"Closed on {moment(deadline, now)}" if deadline is not None and deadline <= now else "Closed"
        return f"{closed}: uploads are no longer accepted."
    opens = utc(rules.opens_at)
    if opens is not None and opens > now:
        due_words = f"; due {moment(deadline, now)}" if deadline is not None else ""
        return f"Opens {moment(opens, now)}, in {span(opens - now)}{due_words}."
    if deadline is None:
        return "No due date."
    extended = rules.extended_until is not None
    if deadline > now:
        if extended:
            was = f" (due {moment(due, now)} for the class)" if due is not None else ""
            return f"Extended for you to {moment(deadline, now)}{was}, {span(deadline - now)} left."
        return f"Due {moment(deadline, now)}, {span(deadline - now)} left."
    what = f"Your extension ended {moment(deadline, now)}" if extended else f"Was due {moment(deadline, now)}"
    return f"{what}, {span(now - deadline)} ago."


def attempts_words(attempts: dict | None, now: datetime) -> str | None:
    """'7 of 10 attempts left today', or when the next one is allowed; None when unlimited or unknown.

    attempts: rules.attempts_status's {"allowed" (0 = unlimited), "left", "period", "resets_at"}.
    """
    if not attempts or not attempts.get("allowed") or attempts.get("left") is None:
        return None
    of, left, period = attempts["allowed"], attempts["left"], attempts.get("period", "day")
    when = PERIOD_WORDS.get(period, f"this {period}")
    if left > 0:
        return f"{left} of {of} attempt{'s' * (of != 1)} left {when}."
    reset = attempts.get("resets_at")
    again = f"; you can submit again from {moment(reset, now)}" if reset is not None else ""
    return f"You have used all {of} attempt{'s' * (of != 1)} {when}{again}."


def describe(rules, attempts: dict | None, now: datetime) -> list[str]:
    """The rules in sentences, most urgent first: dates, attempts, which submission counts, the late policy."""
    lines = [dates(rules, now)]
    if rules.state == "open" and (rules.opens_at is None or utc(rules.opens_at) <= utc(now)):
        lines.append(attempts_words(attempts, now))  # before it opens, attempts are not the question yet
    lines.append(COUNTS.get(rules.counts))
    if rules.state == "open":
        lines.append(late_policy(rules))
    return [line for line in lines if line]


def days_late(rules, at: datetime) -> int:
    """Started days after the deadline and its grace (0 when on time)."""
    if rules.deadline is None:
        return 0
    late = utc(at) - utc(rules.deadline) - timedelta(minutes=rules.grace_minutes)
    return math.ceil(late / DAY) if late > timedelta(0) else 0


def late_notice(rules, fraction: float, at: datetime) -> str | None:
    """What an upload now costs, before it is sent; None when it is on time.

    fraction: rules.late_fraction(rules, at), passed in so the words and the score come from one function.
    """
    if rules.deadline is None or rules.state != "open" or utc(at) <= utc(rules.deadline):
        return None
    days = days_late(rules, at)
    if days == 0:
        return (f"The deadline has passed, but you are within the {grace_words(rules.grace_minutes)} of grace: "
                "this upload loses nothing.")
    late = f"This upload is {days} day{'s' * (days != 1)} late"
    if not fraction:
        return f"{late}: late uploads are accepted without a penalty."
    capped = " (the most a late upload can lose)" if fraction >= rules.late_max and days * rules.late_per_day > fraction else ""
    return f"{late}: it loses {percent(fraction)} of its score{capped}."
