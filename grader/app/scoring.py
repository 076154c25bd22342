"""The bridge to the rubric package: points from a stored report, never from running student code."""
import logging

from ..registry import check_registry

log = logging.getLogger(__name__)
_cache: dict = {}


def current_rubric():
    """The rubric in force (loaded once per process), or None while the rubric package is absent."""
    if "rubric" not in _cache:
        try:
            from rubric import load_rubric
        except ImportError:
            log.warning("the rubric package is not installed: results are stored without scores")
            _cache["rubric"] = None
        else:
            _cache["rubric"] = load_rubric(checks=check_registry())
    return _cache["rubric"]


def reload_rubric():
    """Forget the cached rubric, so the next score uses the rubric file as it is now."""
    _cache.pop("rubric", None)
    return current_rubric()


def policy():
    """The packaged rubric's course policy, or None without a rubric. An assignment's rules: rules.rules_for."""
    rubric = current_rubric()
    return rubric.policy if rubric is not None else None


def compute(report: dict, manual: dict | None = None, rubric=None, submitted_at=None, rules=None) -> dict | None:
    """The rubric's score for a stored report, with the late penalty for submitted_at (naive UTC).

    rules: the assignment's rules for the submission's student (rules.rules_for): their rubric and late penalty
    (extension included). Without them, the packaged rubric's own policy (callers that have no assignment).
    """
    if rules is not None:
        rubric = rubric or rules.rubric
    rubric = rubric or current_rubric()
    if rubric is None:
        return None
    from rubric import apply_late_penalty, late_penalty, score
    scored = score(report, rubric, manual=manual or None)
    if submitted_at is None:
        fraction = 0.0
    elif rules is not None:
        from .rules import late_fraction
        fraction = late_fraction(rules, submitted_at)
    else:
        fraction = late_penalty(submitted_at, rubric.policy)
    return apply_late_penalty(scored, fraction) if fraction else scored


def diff(before: dict | None, after: dict | None):
    """Item by item, what changed between two scores (None when either is missing)."""
    if before is None or after is None:
        return None
    from rubric import diff_scores, diff_totals
    return {"totals": diff_totals(before, after), "items": [r for r in diff_scores(before, after) if r["changed"]]}
