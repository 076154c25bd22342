"""Views of a score dict: what a student may see, points per check, and a plain-text summary."""
from .points import add_points
from .policy import apply_late_penalty


LEVELS = ("hidden", "points", "summary", "full")  # what a student sees of an item (grader/app/visibility.py)


def student_view(score: dict, rubric=None, released=frozenset(), levels=None) -> dict:
    """The score as a student may see it. `levels` ({item or category id: level}) sets what is shown of each item:
    hidden (left out), points (points only), summary (points and a one-line note) or full; an item's own level wins
    over its category's; an item with neither takes the rubric's visibility (visible: full, hidden: hidden).
    `released` ids are items or categories at "full" (the releases before levels existed). Totals cover only what
    is shown, and `hidden` says how many items and points are not shown yet. Visibility comes from `rubric` when
    given (so a visibility change needs no rescore), else from the score."""
    levels = {**{key: "full" for key in released}, **(levels or {})}
    decimals = score.get("decimals", 2)
    categories, hidden = [], []
    for cat in score["categories"]:
        shown = []
        for item in cat["items"]:
            level = item_level(item, cat["id"], rubric, levels)
            if level == "hidden":
                hidden.append(item)
            else:
                shown.append(cut(item, level))
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


def item_level(item: dict, category_id: str, rubric, levels: dict) -> str:
    """The item's own level, else its category's, else the rubric's visibility now (or, for an item the rubric no
    longer has, when it was scored)."""
    if levels.get(item["id"]) in LEVELS:
        return levels[item["id"]]
    if levels.get(category_id) in LEVELS:
        return levels[category_id]
    current = rubric.item(item["id"]) if rubric else None
    shown = current.visibility == "visible" if current else bool(item.get("visible"))
    return "full" if shown else "hidden"


def cut(item: dict, level: str) -> dict:
    """An item row at `level`: points only (no note, no check to open, pending or graded for a status), the
    points and the note's verdict without its measurements, or all of it."""
    if level == "points":
        return {**item, "level": level, "note": "", "check": None,
                "status": "pending" if item.get("status") == "pending" else "graded"}
    if level == "summary" and item.get("kind") == "auto" and not item.get("override"):
        return {**item, "level": level, "note": str(item.get("note") or "").split(": ", 1)[0]}
    return {**item, "level": level}


def visible(item: dict, category_id: str, rubric, released: set) -> bool:
    """Shown at all with these releases (item or category ids at "full")."""
    return item_level(item, category_id, rubric, {key: "full" for key in released}) != "hidden"


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
