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
    """The course policy (attempts, deadline, which submission counts), or None without a rubric."""
    rubric = current_rubric()
    return rubric.policy if rubric is not None else None


def compute(report: dict, manual: dict | None = None, rubric=None, submitted_at=None) -> dict | None:
    """The rubric's score for a stored report, with the late penalty for submitted_at (naive UTC)."""
    rubric = rubric or current_rubric()
    if rubric is None:
        return None
    from rubric import apply_late_penalty, late_penalty, score
    scored = score(report, rubric, manual=manual or None)
    fraction = late_penalty(submitted_at, rubric.policy) if submitted_at is not None else 0.0
    return apply_late_penalty(scored, fraction) if fraction else scored


def diff(before: dict | None, after: dict | None):
    """Item by item, what changed between two scores (None when either is missing)."""
    if before is None or after is None:
        return None
    from rubric import diff_scores, diff_totals
    return {"totals": diff_totals(before, after), "items": [r for r in diff_scores(before, after) if r["changed"]]}
