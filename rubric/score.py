"""Points from stored check results and one rubric version: a pure function, so a rubric change never re-runs code."""
import math

from .points import add_points, round_points

# Statuses other than pass and fail earn nothing: the check measured nothing the judge can trust.
STATUS_NOTES = {
    "error": "your code raised an exception in this check",
    "timeout": "the check ran out of time",
    "oom": "the check ran out of memory",
    "crash": "the check's process died before it reported",
    "skipped": "the check was skipped",
    "missing": "the report has no result for this check",
}


def score(report: dict, rubric, manual: dict | None = None) -> dict:
    """Score one judge report under `rubric`, with manual grades {item_id: {"points", "comment"}}; JSON-ready."""
    manual = manual or {}
    results = {c.get("id"): c for c in report.get("checks", []) if isinstance(c, dict)}
    track = (report.get("submission") or {}).get("track")
    categories = []
    for cat in rubric.categories:
        items = [score_item(item, results.get(item.check), track, manual.get(item.id), rubric.decimals)
                 for item in cat.items]
        categories.append({"id": cat.id, "title": cat.title, "visible": cat.visibility == "visible",
                           "points": add_points((i["points"] for i in items), rubric.decimals), "max": cat.weight,
                           "items": items})
    known = {i.id for _, i in rubric.items()}
    return {"rubric_version": rubric.version, "rubric_digest": rubric.digest, "decimals": rubric.decimals,
            "total": add_points((c["points"] for c in categories), rubric.decimals), "max": rubric.total,
            "categories": categories,
            "pending_manual": [i["id"] for c in categories for i in c["items"] if i["status"] == "pending"],
            "unused_manual": sorted(str(k) for k in manual if k not in known)}


def score_item(item, result: dict | None, track: str | None, grade, decimals: int) -> dict:
    """One item's points, status and a note explaining them."""
    row = {"id": item.id, "title": item.title, "kind": item.kind, "check": item.check, "max": item.points,
           "visible": item.visibility == "visible", "override": False}
    if item.kind == "manual":
        if grade is None:
            return {**row, "points": 0.0, "status": "pending", "note": "not graded yet"}
        points, note = manual_points(grade, item, decimals)
        return {**row, "points": points, "status": "graded", "note": note}
    status = str(result.get("status")) if result else "missing"
    metrics = (result or {}).get("metrics")
    credit, note = auto_credit(item, status, metrics if isinstance(metrics, dict) else {}, track)
    why = str((result or {}).get("message") or "").removeprefix("not run: ")
    if status == "skipped" and why:  # the reason the judge gave, e.g. the training run it needs did not finish
        note = f"the check was skipped ({why}): no points"
    points = round_points(item.points * credit, decimals)
    if grade is not None:  # an instructor's override of an automatic item, e.g. after a regrade request
        over, comment = manual_points(grade, item, decimals)
        return {**row, "points": over, "status": status, "override": True,
                "note": f"set by the instructor (automatic: {points:g}): {comment}".rstrip(": ")}
    return {**row, "points": points, "status": status, "note": note}


def auto_credit(item, status: str, metrics: dict, track: str | None) -> tuple[float, str]:
    """The fraction of an automatic item's points, and why."""
    if status not in ("pass", "fail"):
        return 0.0, STATUS_NOTES.get(status, f"unknown status {status!r}") + ": no points"
    rules = [r for r in item.partial if r.track in (None, track)]
    if not rules:
        return (1.0, "passed") if status == "pass" else (0.0, "failed: this check earns no partial credit")
    parts = [rule_credit(r, metrics, status) for r in rules]
    credit = sum(r.weight * c for r, (c, _) in zip(rules, parts)) / sum(r.weight for r in rules)
    notes = "; ".join(n for _, n in parts)
    if status == "fail" and credit > item.fail_cap:
        credit = item.fail_cap
        notes += f"; capped at {item.fail_cap:.0%} because the check failed"
    return credit, ("passed" if status == "pass" else "failed, partial credit") + f" {credit:.0%}: {notes}"


def rule_credit(rule, metrics: dict, status: str) -> tuple[float, str]:
    """Linear credit between the rule's zero and full values, clamped to [0, 1]."""
    value = measured(rule, metrics)
    if value is None:
        # Several checks report metrics only when they fail, so a pass without them means nothing was wrong.
        return (1.0, f"{rule.label} not reported, full credit for a pass") if status == "pass" else \
               (0.0, f"{rule.label} not reported")
    credit = min(1.0, max(0.0, (value - rule.zero) / (rule.full - rule.zero)))
    return credit, f"{rule.label} = {value:.4g} (full credit at {rule.full:g}, none at {rule.zero:g})"


def measured(rule, metrics: dict) -> float | None:
    """The rule's value from the metrics: their sum, divided by `per`; None when any is missing or not a number."""
    values = [metrics.get(name) for name in rule.metrics]
    if not all(is_number(v) for v in values):
        return None
    value = float(sum(values))
    if rule.per:
        per = metrics.get(rule.per)
        if not is_number(per) or per == 0:
            return None
        value /= per
    return value


def is_number(value) -> bool:
    """A finite int or float; NaN, booleans and strings do not count as measurements."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def manual_points(grade, item, decimals: int) -> tuple[float, str]:
    """Points and comment from a manual grade, kept within 0..max (a rubric change may lower an item's max)."""
    if isinstance(grade, dict):
        points, comment = grade.get("points"), str(grade.get("comment") or "")
    else:
        points, comment = grade, ""
    if not is_number(points):
        raise ValueError(f"the manual grade for {item.id!r} needs numeric points, not {points!r}")
    kept = min(max(float(points), 0.0), item.points)
    if kept != points:
        comment = f"{comment} ({points:g} kept within 0-{item.points:g})".strip()
    return round_points(kept, decimals), comment
