"""Views of a score dict: what a student may see, points per check, and a plain-text summary."""
from .points import add_points
from .policy import apply_late_penalty


def student_view(score: dict, rubric=None, released=frozenset()) -> dict:
    """The score without hidden items the instructor has not released (release an item id, or a category id for all
    its items); totals cover only what is shown, and `hidden` says how many items and points are still to come.
    Visibility comes from `rubric` when given (so a visibility change needs no rescore), else from the score."""
    released, decimals = set(released), score.get("decimals", 2)
    categories, hidden = [], []
    for cat in score["categories"]:
        shown = []
        for item in cat["items"]:
            (shown if visible(item, cat["id"], rubric, released) else hidden).append(item)
        if shown:
            categories.append({**cat, "items": shown, "points": add_points((i["points"] for i in shown), decimals),
                               "max": add_points((i["max"] for i in shown), decimals)})
    shown_ids = {i["id"] for c in categories for i in c["items"]}
    view = {key: value for key, value in score.items()
            if key not in ("unused_manual", "late_penalty", "total_before_penalty")}
    view.update(categories=categories, total=add_points((c["points"] for c in categories), decimals),
                max=add_points((c["max"] for c in categories), decimals),
                pending_manual=[i for i in score.get("pending_manual", []) if i in shown_ids],
                hidden={"items": len(hidden), "max": add_points((i["max"] for i in hidden), decimals)})
    if "late_penalty" in score:  # the same fraction, taken from what the student can see
        view = apply_late_penalty(view, score["late_penalty"]["fraction"])
    return view


def visible(item: dict, category_id: str, rubric, released: set) -> bool:
    """Visible in the rubric now (or, for an item the rubric no longer has, when scored), or released."""
    current = rubric.item(item["id"]) if rubric else None
    shown = current.visibility == "visible" if current else bool(item.get("visible"))
    return shown or item["id"] in released or category_id in released


def points_by_check(score: dict) -> dict:
    """check id -> (points, max) over the automatic items that draw on it."""
    out = {}
    for cat in score["categories"]:
        for item in cat["items"]:
            if item.get("check"):
                points, most = out.get(item["check"], (0.0, 0.0))
                out[item["check"]] = (points + item["points"], most + item["max"])
    return out


def summary_lines(score: dict) -> list[str]:
    """A short text summary: the total, then each category with its points and what is still pending."""
    pending = score.get("pending_manual", [])
    waiting = sum(i["max"] for c in score["categories"] for i in c["items"] if i["id"] in pending)
    head = f"rubric {score['rubric_version']}: {score['total']:g} of {score['max']:g} points"
    if pending:
        head += f" so far; {len(pending)} manual item{'s' * (len(pending) > 1)} not graded yet ({waiting:g} points)"
    width = max((len(c["id"]) for c in score["categories"]), default=10)
    lines = [head]
    for cat in score["categories"]:
        todo = [i["id"] for i in cat["items"] if i["id"] in pending]
        unrun = sum(1 for i in cat["items"] if i["status"] == "missing")
        notes = ([f"manual pending: {', '.join(todo)}"] if todo else []) + \
                ([f"{unrun} check{'s' * (unrun > 1)} not run"] if unrun else [])
        lines.append(f"  {cat['id']:<{width}}  {cat['points']:>6.2f}/{cat['max']:<4g} {'; '.join(notes)}".rstrip())
    return lines
