"""Course policy: the late penalty, attempts per period, and which submission counts."""
from datetime import datetime, timedelta, timezone

import pytest

from grader.registry import check_registry
from rubric import (Policy, apply_late_penalty, attempts_left, attempts_used, counted_submission, late_penalty,
                    next_period_starts, parse_rubric)
from tests.support.rubrics import SMALL_RUBRIC

UTC = timezone.utc
DEADLINE = datetime(2026, 12, 18, 23, 59, tzinfo=UTC)
LATE = Policy(deadline=DEADLINE, grace_minutes=15, late_per_day=0.1, late_max=0.5)


@pytest.mark.parametrize("after, fraction", [
    (timedelta(days=-3), 0.0),
    (timedelta(0), 0.0),
    (timedelta(minutes=15), 0.0),  # within the grace period
    (timedelta(minutes=16), 0.1),  # a started day counts as a day
    (timedelta(days=1, minutes=15), 0.1),
    (timedelta(days=1, minutes=16), 0.2),
    (timedelta(days=3), 0.3),
    (timedelta(days=30), 0.5),  # capped by late_penalty_max
])
def test_late_penalty_per_started_day_after_grace(after, fraction):
    assert late_penalty(DEADLINE + after, LATE) == fraction, f"{after} after the deadline"


@pytest.mark.parametrize("policy", [Policy(), Policy(deadline=DEADLINE), Policy(late_per_day=0.2)])
def test_no_penalty_without_a_deadline_or_a_rate(policy):
    assert late_penalty(DEADLINE + timedelta(days=5), policy) == 0.0


@pytest.mark.parametrize("when", ["2026-12-19T00:30:00+00:00", "2026-12-19T00:30:00Z", datetime(2026, 12, 19, 0, 30)])
def test_submission_times_as_iso_strings_or_naive_utc(when):
    assert late_penalty(when, LATE) == 0.1, f"{when!r} is 31 minutes late"


def test_deadline_in_local_time_of_the_policy_timezone():
    rubric = parse_rubric(RUBRIC_WITH_POLICY.replace("deadline = 2026-12-18T23:59:00Z",
                                                     "deadline = 2026-12-18T23:59:00"), "t", checks=check_registry())
    assert rubric.policy.deadline == datetime(2026, 12, 18, 22, 59, tzinfo=UTC), "Berlin is UTC+1 in December"


def test_penalty_applied_to_a_score_never_stacks():
    scored = {"total": 80.0, "decimals": 2, "categories": []}
    once = apply_late_penalty(scored, 0.25)
    again = apply_late_penalty(once, 0.1)
    assert (once["total"], once["late_penalty"]["points"]) == (60.0, 20.0), once
    assert (again["total"], again["total_before_penalty"]) == (72.0, 80.0), "a new penalty replaces the old"
    assert scored == {"total": 80.0, "decimals": 2, "categories": []}, "the input is not modified"


BERLIN_DAY = Policy(attempts=3, period="day", timezone="Europe/Berlin")


def at(text: str) -> datetime:
    """An aware datetime from ISO text."""
    return datetime.fromisoformat(text)


@pytest.mark.parametrize("policy, times, now, used", [
    # 23:30 UTC on the 17th is already the 18th in Berlin
    (BERLIN_DAY, ["2026-12-17T22:30:00+00:00", "2026-12-17T23:30:00+00:00"], "2026-12-18T08:00:00+00:00", 1),
    (BERLIN_DAY, ["2026-12-18T08:00:00+00:00"] * 3, "2026-12-18T20:00:00+00:00", 3),
    (Policy(attempts=5, period="week"), ["2026-12-14T00:00:00+00:00", "2026-12-20T23:59:00+00:00",
                                         "2026-12-21T00:00:00+00:00"], "2026-12-16T12:00:00+00:00", 2),  # Mon-Sun
    (Policy(attempts=5, period="term"), ["2026-09-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00"],
     "2026-12-18T00:00:00+00:00", 2),
])
def test_attempts_are_counted_per_period(policy, times, now, used):
    assert attempts_used([at(t) for t in times], at(now), policy) == used
    assert attempts_left([at(t) for t in times], at(now), policy) == max(0, policy.attempts - used)


def test_unlimited_attempts():
    assert attempts_left([DEADLINE] * 100, DEADLINE, Policy(attempts=0)) is None


@pytest.mark.parametrize("policy, now, reset", [
    (BERLIN_DAY, "2026-12-18T20:00:00+00:00", "2026-12-19T00:00:00+01:00"),
    (Policy(attempts=1, period="week"), "2026-12-16T12:00:00+00:00", "2026-12-21T00:00:00+00:00"),
    (Policy(attempts=1, period="term"), "2026-12-16T12:00:00+00:00", None),
])
def test_when_attempts_reset(policy, now, reset):
    got = next_period_starts(at(now), policy)
    assert got == (at(reset) if reset else None), got


def sub(day: int, total, hour: int = 12) -> dict:
    """A stored submission on a December day with a score total (None: still being graded)."""
    return {"id": f"{day}-{hour}", "submitted_at": datetime(2026, 12, day, hour, tzinfo=UTC),
            "score": None if total is None else {"total": total}}


@pytest.mark.parametrize("counts, subs, expected", [
    ("best", [sub(1, 50), sub(2, 80), sub(3, 60)], "2-12"),
    ("best", [sub(1, 80), sub(2, 80, 9), sub(3, 60)], "2-9"),  # a tie goes to the later submission
    ("best", [sub(1, 50), sub(2, None)], "1-12"),  # an ungraded submission cannot be the best yet
    ("last", [sub(1, 90), sub(3, 10), sub(2, 50)], "3-12"),
    ("last", [sub(1, 90), sub(3, None)], "3-12"),  # the last counts even while it is graded
    ("best", [], None),
])
def test_counted_submission(counts, subs, expected):
    chosen = counted_submission(subs, Policy(counts=counts))
    assert (chosen and chosen["id"]) == expected, f"{counts}: chose {chosen}"


RUBRIC_WITH_POLICY = SMALL_RUBRIC.replace("total = 10\n", '''total = 10
[policy]
attempts_per_period = 4
period = "week"
timezone = "Europe/Berlin"
deadline = 2026-12-18T23:59:00Z
grace_minutes = 10
late_penalty_per_day = 0.05
late_penalty_max = 0.3
counts = "last"
''')


def test_policy_is_read_from_the_rubric_file():
    policy = parse_rubric(RUBRIC_WITH_POLICY, "t", checks=check_registry()).policy
    assert policy == Policy(attempts=4, period="week", timezone="Europe/Berlin", deadline=DEADLINE,
                            grace_minutes=10, late_per_day=0.05, late_max=0.3, counts="last"), policy
