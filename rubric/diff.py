"""Before and after, item by item: what a regrade or a rubric change did to a score."""


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
