"""Before and after, item by item: what a regrade or a rubric change did to a score."""
from .score import score as score_report


def item_rows(score: dict | None) -> dict:
    """item id -> (category id, item) in score order."""
    if not score:
        return {}
    return {i["id"]: (c["id"], i) for c in score["categories"] for i in c["items"]}


def diff_scores(before: dict | None, after: dict | None) -> list[dict]:
    """One row per item in either score (after's order, then removed items): points, max and status on each side."""
    old, new = item_rows(before), item_rows(after)
    rows = []
    for item_id in [*new, *(i for i in old if i not in new)]:
        (cat_b, b), (cat_a, a) = old.get(item_id, (None, {})), new.get(item_id, (None, {}))
        rows.append({"id": item_id, "category": cat_a or cat_b, "kind": a.get("kind") or b.get("kind"),
                     "before": b.get("points"), "after": a.get("points"),
                     "delta": round(a.get("points", 0.0) - b.get("points", 0.0), 9),
                     "max_before": b.get("max"), "max_after": a.get("max"),
                     "status_before": b.get("status"), "status_after": a.get("status"),
                     "changed": any(b.get(k) != a.get(k) for k in ("points", "max", "status"))})
    return rows


def diff_totals(before: dict | None, after: dict | None) -> dict:
    """The totals and rubric versions on each side."""
    b, a = before or {}, after or {}
    return {"before": b.get("total"), "after": a.get("total"),
            "delta": round(a.get("total", 0.0) - b.get("total", 0.0), 9),
            "version_before": b.get("rubric_version"), "version_after": a.get("rubric_version")}


def rescore(stored, rubric) -> list[dict]:
    """Score every stored result again under `rubric`, without running any code.

    `stored` holds mappings with "id", "report" (the judge's dict), optional "score" (the one stored before) and
    optional "manual" (the manual grades); each answer has the id, the new score, the totals and the changed items.
    """
    out = []
    for rec in stored:
        after = score_report(rec["report"], rubric, rec.get("manual"))
        before = rec.get("score")
        out.append({"id": rec.get("id"), "score": after, "totals": diff_totals(before, after),
                    "changes": [r for r in diff_scores(before, after) if r["changed"]]})
    return out


def format_diff(rows: list[dict]) -> list[str]:
    """Readable lines for a diff: 'category/item  before -> after  (status change)'."""
    lines = []
    for r in rows:
        side = lambda p, m: "-" if p is None else f"{p:g}/{m:g}"  # noqa: E731
        status = f"  ({r['status_before']} -> {r['status_after']})" if r["status_before"] != r["status_after"] else ""
        lines.append(f"{r['category']}/{r['id']}  {side(r['before'], r['max_before'])} -> "
                     f"{side(r['after'], r['max_after'])}{status}")
    return lines
