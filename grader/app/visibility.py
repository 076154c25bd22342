"""Feedback visibility per rubric item: what a student sees of each item's result, and so of each check's.

Levels (models.FEEDBACK_LEVELS): hidden (nothing: not its points, not its check's message, details, metrics or
output; the total leaves it out and says only that some items are not shown yet), points (the points, no message),
summary (the points and the check's one-line message; no details, metrics or output) and full (everything).
A FeedbackRule sets the level of an item or of a whole category (an item's own rule wins over its category's), now
and optionally another from a date on; an item without a rule takes the rubric's visibility (visible: full,
hidden: hidden). A check shows as much as the most visible item that draws on it; a check no item draws on shows in
full, as before. Instructors always see everything: these functions are only for what a student reads.
"""
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from sqlalchemy import select
from sqlalchemy.orm import Session

from . import rules
from .models import FEEDBACK_LEVELS, Assignment, FeedbackRule, Instructor, Release, utcnow
from .store import StoreError

RANK = {level: n for n, level in enumerate(FEEDBACK_LEVELS)}
DUE = "due"  # switch_at "due": the assignment's due date
CACHE = "feedback_levels"  # Session.info key: assignment id -> Visibility, for one request's many rows


def rubric_of(s: Session, assignment: Assignment):
    """The assignment's pinned rubric (or the packaged one): the items the levels are about."""
    return rules.rubric_for(s, assignment)


def naive_utc(at: datetime | None) -> datetime | None:
    """A datetime as the database keeps it: naive UTC."""
    if at is not None and at.tzinfo is not None:
        at = at.astimezone(timezone.utc).replace(tzinfo=None)
    return at


def switch_time(rule: FeedbackRule, due: datetime | None) -> datetime | None:
    """When the rule's later level starts: the due date `due` (naive UTC) as it is now for a rule set "at the due
    date", else the date it was given."""
    if rule.switch_at_due and due is not None:
        return due
    return rule.switch_at


def level_now(rule: FeedbackRule, at: datetime | None = None, due: datetime | None = None) -> str:
    """The rule's level at `at` (naive UTC; default now): later_level from its switch time on."""
    at = naive_utc(at) or utcnow()
    switch = switch_time(rule, due)
    if rule.later_level and switch is not None and at >= switch:
        return rule.later_level
    return rule.level


def current_due(s: Session, assignment: Assignment, stored: dict) -> datetime | None:
    """The assignment's due date now (naive UTC) if a rule follows it, else None (not looked up)."""
    if not any(rule.switch_at_due for rule in stored.values()):
        return None
    return naive_utc(rules.rules_for(s, assignment).due_at)


def default_level(visibility: str) -> str:
    """The level of an item without a rule: the rubric's visibility."""
    return "full" if visibility == "visible" else "hidden"


@dataclass(frozen=True)
class Visibility:
    """An assignment's levels at one moment: `rules` (key -> level) for the keys that have a rule, `items` (item id
    -> level) and `checks` (check id -> level) resolved over its rubric."""
    rules: dict = field(default_factory=dict)
    items: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)

    def check(self, check_id) -> str:
        """What a student sees of this check's result (full for a check no rubric item draws on)."""
        return self.checks.get(check_id, "full")


def stored_rules(s: Session, assignment: Assignment) -> dict[str, FeedbackRule]:
    """key -> FeedbackRule; a release made before levels existed (Release row) counts as a rule "full"."""
    rules = {r.key: r for r in s.scalars(select(FeedbackRule).where(FeedbackRule.assignment_id == assignment.id))}
    for old in s.scalars(select(Release).where(Release.assignment_id == assignment.id)):
        rules.setdefault(old.key, FeedbackRule(assignment_id=assignment.id, key=old.key, level="full",
                                               instructor_id=old.instructor_id, created_at=old.created_at))
    return rules


def resolve(rubric, rules: dict[str, str]) -> tuple[dict, dict]:
    """(item id -> level, check id -> level) over the rubric: an item's rule, else its category's, else default."""
    items, checks = {}, {}
    for cat, item in rubric.items() if rubric is not None else []:
        level = rules.get(item.id) or rules.get(cat.id) or default_level(item.visibility)
        items[item.id] = level
        if item.check:
            checks[item.check] = max(checks.get(item.check, "hidden"), level, key=RANK.__getitem__)
    return items, checks


def levels(s: Session, assignment: Assignment, at: datetime | None = None) -> Visibility:
    """The assignment's levels at `at` (default now; cached per session for now)."""
    cache = s.info.setdefault(CACHE, {}) if at is None else {}
    if assignment.id in cache:
        return cache[assignment.id]
    stored = stored_rules(s, assignment)
    due = current_due(s, assignment, stored)
    rules = {key: level_now(rule, at, due) for key, rule in stored.items()}
    items, checks = resolve(rubric_of(s, assignment), rules)
    cache[assignment.id] = found = Visibility(rules, items, checks)
    return found


def forget(s: Session) -> None:
    """Drop the session's cached levels (after a rule changes)."""
    s.info.pop(CACHE, None)


# ---------------------------------------------------------------- setting levels

def known_keys(rubric) -> dict[str, str]:
    """key -> "category" or "item" for every id the rubric has."""
    if rubric is None:
        return {}
    return {**{c.id: "category" for c in rubric.categories}, **{i.id: "item" for _, i in rubric.items()}}


def parse_level(value, what: str = "level", optional: bool = False) -> str | None:
    """A level name, or StoreError naming the known ones."""
    if optional and value in (None, ""):
        return None
    if value not in FEEDBACK_LEVELS:
        raise StoreError(f"{what} must be one of {', '.join(FEEDBACK_LEVELS)}, not {value!r}")
    return value


def parse_when(value, naive_is_utc: bool = False) -> datetime | None:
    """switch_at from ISO 8601 text with a zone (as the assignment's dates), as naive UTC; naive_is_utc: a form's
    field labelled UTC."""
    if value in (None, "") or isinstance(value, datetime):
        return naive_utc(value) if value else None
    if not isinstance(value, str):
        raise StoreError(f"switch_at must be an ISO 8601 date and time, not {value!r}")
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise StoreError(f"switch_at must be an ISO 8601 date and time such as 2026-12-19T00:00Z, not {value!r}") \
            from None
    if when.tzinfo is None and not naive_is_utc:
        raise StoreError(f"switch_at {value!r} has no time zone: add Z (UTC) or an offset such as +01:00")
    return naive_utc(when)


def due_date(s: Session, assignment: Assignment) -> datetime:
    """The assignment's due date (its own, or its rubric policy's), naive UTC: switch_at "due"."""
    due = rules.rules_for(s, assignment).due_at
    if due is None:
        raise StoreError(f"{assignment.slug} has no due date: give switch_at as a date and time")
    return naive_utc(due)


def set_rule(s: Session, assignment: Assignment, key: str, level, later_level=None, switch_at=None,
             instructor: Instructor | None = None) -> FeedbackRule:
    """Set what students see of an item or category: `level` now, `later_level` from `switch_at` on (a datetime,
    ISO 8601 text, or "due" for the assignment's due date)."""
    kinds = known_keys(rubric_of(s, assignment))
    if key not in kinds:
        raise StoreError(f"{key!r} is not an item or category of the assignment's rubric")
    level, later = parse_level(level), parse_level(later_level, "later_level", optional=True)
    at_due = switch_at == DUE
    when = due_date(s, assignment) if at_due else parse_when(switch_at)
    if (later is None) != (when is None):
        raise StoreError("a later level needs switch_at (when it starts), and switch_at needs later_level")
    row = s.scalar(select(FeedbackRule).where(FeedbackRule.assignment_id == assignment.id, FeedbackRule.key == key))
    if row is None:
        row = FeedbackRule(assignment_id=assignment.id, key=key)
        s.add(row)
    row.level, row.later_level, row.switch_at, row.switch_at_due = level, later, when, at_due
    row.instructor_id, row.created_at = (instructor.id if instructor else None), utcnow()
    drop_release(s, assignment, key)
    s.flush()
    forget(s)
    return row


def clear_rule(s: Session, assignment: Assignment, key: str) -> bool:
    """Back to the rubric's default for `key`; False when it had no rule."""
    row = s.scalar(select(FeedbackRule).where(FeedbackRule.assignment_id == assignment.id, FeedbackRule.key == key))
    had = drop_release(s, assignment, key)
    if row is not None:
        s.delete(row)
    s.flush()
    forget(s)
    return row is not None or had


def drop_release(s: Session, assignment: Assignment, key: str) -> bool:
    """Remove a pre-levels Release of `key` (a rule replaces it)."""
    old = s.scalar(select(Release).where(Release.assignment_id == assignment.id, Release.key == key))
    if old is not None:
        s.delete(old)
    return old is not None


def rule_rows(s: Session, assignment: Assignment, at: datetime | None = None) -> list[dict]:
    """For the instructor: each category and item with its default, its rule (if any) and its level now."""
    rubric = rubric_of(s, assignment)
    stored = stored_rules(s, assignment)
    due = current_due(s, assignment, stored)
    now = levels(s, assignment, at)
    rows = []
    for cat in rubric.categories if rubric is not None else []:
        rows.append(rule_row(cat.id, cat.title, "category", None, default_level(cat.visibility), stored.get(cat.id),
                             now.rules.get(cat.id) or default_level(cat.visibility), cat.weight, due=due))
        for item in cat.items:
            rows.append(rule_row(item.id, item.title, "item", item.check, default_level(item.visibility),
                                 stored.get(item.id), now.items[item.id], item.points, cat.id, due))
    return rows


def rule_row(key, title, kind, check, default, rule, effective, points, category=None, due=None) -> dict:
    return {"key": key, "title": title, "kind": kind, "check": check, "category": category, "points": points,
            "default": default, "level": rule.level if rule else None,
            "later_level": rule.later_level if rule else None, "switch_at": switch_time(rule, due) if rule else None,
            "switch_at_due": bool(rule and rule.switch_at_due), "effective": effective}


# ---------------------------------------------------------------- what a student reads

def first_line(text) -> str:
    return str(text or "").strip().split("\n", 1)[0]


def student_check(check: dict, level: str) -> dict | None:
    """A check result as a student may read it at `level`: None below summary (its points show in the score)."""
    if RANK.get(level, 0) < RANK["summary"]:
        return None
    if level == "full":
        return check
    return {"id": check.get("id"), "status": check.get("status"), "message": first_line(check.get("message")),
            "details": [], "metrics": {}, "stdout": "", "duration_s": check.get("duration_s")}


def student_checks(checks, vis: Visibility) -> list[dict]:
    """The check results a student may read, each cut to its level."""
    out = []
    for c in checks or []:
        if isinstance(c, dict):
            shown = student_check(told_as_readable(c, vis), vis.check(c.get("id")))
            if shown is not None:
                out.append(without_unread_cause(shown, vis))
    return out


def told_as_readable(check: dict, vis: Visibility) -> dict:
    """The check with each phrase of its message and details that tells how a check the student cannot read went
    ("causality passed, so ...") in its form that does not (the judge's asides); the asides themselves are dropped."""
    out = {k: v for k, v in check.items() if k != "asides"}
    blind = {str(a["told"]): str(a.get("blind") or "") for a in check.get("asides") or []
             if isinstance(a, dict) and a.get("told") and not all(readable(vis, c) for c in a.get("checks") or [])}
    if blind:  # in one pass, longest first: a blind form is never read again as another aside's told
        told = re.compile("|".join(map(re.escape, sorted(blind, key=len, reverse=True))))
        out["message"] = told.sub(lambda m: blind[m.group(0)], str(out.get("message") or ""))
        out["details"] = [told.sub(lambda m: blind[m.group(0)], d) if isinstance(d, str) else d
                          for d in out.get("details") or []]
    return out


def without_unread_cause(check: dict, vis: Visibility) -> dict:
    """The check without its root cause when that names a check the student cannot read: "fix split_heads first"
    would tell them a hidden check failed."""
    cause = check.get("root_cause")
    if isinstance(cause, dict) and not readable(vis, cause.get("check")):
        return {k: v for k, v in check.items() if k != "root_cause"}
    return check


def student_report(report: dict | None, vis: Visibility) -> dict:
    """A judge report as a student may read it: checks cut to their levels, the counts and timings of those only,
    and never the seed."""
    report = dict(report or {})
    report.pop("seed", None)  # the judge's seed is never shown to students
    original = [c for c in report.get("checks", []) if isinstance(c, dict)]
    checks = student_checks(original, vis)
    report["checks"] = checks
    if "summary" in report:  # counts over what the student can read: a hidden check is not counted either
        summary: dict = {}
        for c in checks:
            summary[c.get("status")] = summary.get(c.get("status"), 0) + 1
        report["summary"] = summary
    unread = {str(c.get("id")) for c in original} - {str(c.get("id")) for c in checks}
    if unread and isinstance(report.get("timings"), dict):
        report["timings"] = {**report["timings"], "stages": without_checks(report["timings"].get("stages"), unread)}
        # the diagnosis run happens only when a function check failed: with one unread, its time would tell
        report["timings"].pop("root_cause_s", None)
    return report


def without_checks(stages, unread: set):
    """Per-stage timings without the stages of checks the student cannot read ("<check>.<stage>" keys)."""
    def readable(key) -> bool:
        return str(key).split(".", 1)[0] not in unread
    if isinstance(stages, dict):
        return {k: v for k, v in stages.items() if readable(k)}
    if isinstance(stages, list):
        return [st for st in stages if not isinstance(st, dict) or readable(st.get("key") or st.get("stage") or "")]
    return stages


def readable(vis: Visibility, check_id) -> bool:
    """Whether a student reads this check's result at all (summary or full); below that only points show."""
    return RANK[vis.check(check_id)] >= RANK["summary"]


def student_progress(progress: dict | None, checks: list, vis: Visibility) -> dict | None:
    """The running check as a student may see it: a check below summary is not named, nor counted."""
    if progress is None:
        return None
    shown = [c for c in checks if readable(vis, c)]
    current = progress.get("check")
    if current is not None and current not in shown:
        return {"check": None, "index": None, "of": len(shown), "phase": "checking"}
    return {**progress, "index": shown.index(current) + 1 if current in shown else None, "of": len(shown)}


def student_score(scored: dict | None, rubric, vis: Visibility) -> dict | None:
    """A score as a student may see it (rubric.student_view with the assignment's levels)."""
    if scored is None or rubric is None:
        return None
    from rubric import student_view
    return student_view(scored, rubric, levels=vis.rules)
