"""One category of a rubric file: its items and their partial-credit rules, validated against the checks' metrics."""
import math
import re

from .model import KINDS, TRACKS, VISIBILITIES, Category, Item, Rule
from .problems import Problems, suggest, unknown_keys

CATEGORY_KEYS = {"id", "title", "weight", "visibility", "items"}
ITEM_KEYS = {"id", "kind", "title", "description", "check", "points", "visibility", "partial", "fail_cap"}
RULE_KEYS = {"metric", "per", "full", "zero", "track", "weight"}
ID_FORMAT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")  # safe in CSV headers, URLs and form field names


def number(value) -> bool:
    """A real, finite number (TOML booleans are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def close(a: float, b: float) -> bool:
    """Sums of decimal points compared without binary rounding noise."""
    return math.isclose(a, b, rel_tol=0, abs_tol=1e-9)


def identifier(value, what: str, report) -> str | None:
    """A valid id, or None after reporting why not."""
    if not isinstance(value, str) or not ID_FORMAT.match(value):
        report(f'{what} must be a string of letters, digits, "_", "." or "-", not {value!r}')
        return None
    return value


def build_category(raw, n: int, p: Problems, checks: dict) -> Category | None:
    """One [[categories]] table."""
    if not isinstance(raw, dict):
        p.add("must be a table ([[categories]])", category=f"#{n + 1}")
        return None
    cid = identifier(raw.get("id"), '"id"', lambda m: p.add(m, category=f"#{n + 1}")) or f"#{n + 1}"
    for msg in unknown_keys(raw, CATEGORY_KEYS, "a category"):
        p.add(msg, category=cid)
    weight = raw.get("weight")
    if not number(weight) or weight < 0:
        p.add(f'"weight" must be a number of points (0 or more), not {weight!r}', category=cid)
        weight = None
    visibility = raw.get("visibility", "visible")
    if visibility not in VISIBILITIES:
        p.add(f'"visibility" must be one of {", ".join(VISIBILITIES)}, not {visibility!r}', category=cid)
        visibility = "visible"
    raw_items = raw.get("items")
    if not isinstance(raw_items, list) or not raw_items:
        p.add("the category has no items: add [[categories.items]] tables under it", category=cid)
        raw_items = []
    items = [i for m, r in enumerate(raw_items) if (i := build_item(r, m, cid, visibility, p, checks))]
    points = sum(i.points for i in items)
    if weight is not None and items and len(items) == len(raw_items) and not close(points, weight):
        listed = " + ".join(f"{i.id} {i.points:g}" for i in items)
        p.add(f"item points sum to {points:g}, not the category weight {weight:g}: {listed}", category=cid)
    title = raw.get("title", cid)
    if not isinstance(title, str):
        p.add('"title" must be a string', category=cid)
        title = cid
    if cid.startswith("#") or weight is None:
        return None
    return Category(id=cid, title=title, weight=float(weight), visibility=visibility, items=tuple(items))


def build_item(raw, m: int, cid: str, default_visibility: str, p: Problems, checks: dict) -> Item | None:
    """One [[categories.items]] table: an automatic check's points, or a manual item."""
    if not isinstance(raw, dict):
        p.add(f"item #{m + 1} must be a table ([[categories.items]])", category=cid)
        return None
    iid = identifier(raw.get("id"), '"id"', lambda msg: p.add(msg, cid, f"#{m + 1}")) or f"#{m + 1}"
    report = lambda msg: p.add(msg, cid, iid)  # noqa: E731  (the one place problems for this item go)
    for msg in unknown_keys(raw, ITEM_KEYS, "an item"):
        report(msg)
    check = raw.get("check")
    ok = True
    if check is not None and not isinstance(check, str):
        report(f'"check" must be a check id (a string), not {check!r}')
        check, ok = None, False
    kind = raw.get("kind", "auto" if check is not None else "manual")
    if kind not in KINDS:
        report(f'"kind" must be "auto" or "manual", not {kind!r}')
        ok = False
    elif kind == "auto" and check is None:
        report('an automatic item needs "check", the id of the check it scores')
        ok = False
    elif kind == "manual" and check is not None:
        report('a manual item takes no "check" (drop it, or make the item kind = "auto")')
        ok = False
    if check is not None and check not in checks:
        report(f'unknown check id "{check}"{suggest(check, checks)}; the checks that exist: {", ".join(checks)}')
        ok = False
    description = raw.get("description", "")
    if not isinstance(description, str):
        report('"description" must be a string')
        description = ""
    if kind == "manual" and not description.strip():
        report('a manual item needs a "description" that tells the instructor what to look for')
        ok = False
    if kind == "manual":
        for key in ("partial", "fail_cap"):
            if key in raw:
                report(f'"{key}" applies to automatic items only; a manual item is graded by hand')
    points = raw.get("points")
    if not number(points) or points < 0:
        report(f'"points" must be a number (0 or more), not {points!r}')
        ok = False
    visibility = raw.get("visibility", default_visibility)
    if visibility not in VISIBILITIES:
        report(f'"visibility" must be one of {", ".join(VISIBILITIES)}, not {visibility!r}')
    fail_cap = raw.get("fail_cap", 1.0)
    if not number(fail_cap) or not 0 <= fail_cap <= 1:
        report(f'"fail_cap" must be a fraction from 0 to 1, not {fail_cap!r}')
        fail_cap = 1.0
    rules = build_rules(raw.get("partial", []), check, checks.get(check), report) if kind == "auto" else ()
    title = raw.get("title", check if kind == "auto" and isinstance(check, str) else iid)
    if not isinstance(title, str):
        report('"title" must be a string')
        title = iid
    if not ok or iid.startswith("#"):
        return None
    return Item(id=iid, kind=kind, points=float(points), title=title, description=description.strip(),
                check=check if kind == "auto" else None, partial=rules, fail_cap=float(fail_cap),
                visibility=visibility if visibility in VISIBILITIES else "visible")


def build_rules(raw, check, metrics, report) -> tuple:
    """The item's partial-credit rules; a single table is accepted as one rule."""
    raw = [raw] if isinstance(raw, dict) else raw
    if not isinstance(raw, list):
        report('"partial" must be a list of rules, e.g. partial = [{metric = "loss_ratio", full = 0.8, zero = 1.0}]')
        return ()
    rules = []
    for n, r in enumerate(raw):
        rule = build_rule(r, check, metrics, lambda msg, n=n: report(f"partial[{n}]: {msg}"))
        if rule:
            rules.append(rule)
    return tuple(rules)


def build_rule(raw, check, metrics, report) -> Rule | None:
    """One threshold rule on a check's metrics, checked against the metric names the check declares."""
    if not isinstance(raw, dict):
        report("must be a table with metric, full and zero")
        return None
    for msg in unknown_keys(raw, RULE_KEYS, "a partial-credit rule"):
        report(msg)
    names = raw.get("metric")
    names = [names] if isinstance(names, str) else names
    ok = True
    if not isinstance(names, list) or not names or not all(isinstance(x, str) for x in names):
        report('"metric" must name one metric, or a list of metrics to add up')
        names, ok = [], False
    per = raw.get("per")
    if per is not None and not isinstance(per, str):
        report('"per" must name a metric')
        per, ok = None, False
    if metrics is not None:  # None: the check is unknown, already reported
        reports = ", ".join(metrics) if metrics else "no metrics"
        for name in [*names, *([per] if per else [])]:
            if name not in metrics:
                report(f'threshold on metric "{name}", which check "{check}" does not report'
                       f'{suggest(name, metrics)}; it reports: {reports}')
                ok = False
    full, zero = raw.get("full"), raw.get("zero")
    if not number(full) or not number(zero):
        report(f'"full" and "zero" must both be numbers (the value earning full credit and the one earning none), '
               f'not {full!r} and {zero!r}')
        ok = False
    elif full == zero:
        report(f'"full" and "zero" are both {full:g}: credit is interpolated between them, so they must differ')
        ok = False
    track = raw.get("track")
    if track is not None and track not in TRACKS:
        report(f'"track" must be one of {", ".join(TRACKS)} (or left out for both), not {track!r}')
        ok = False
    weight = raw.get("weight", 1.0)
    if not number(weight) or weight <= 0:
        report(f'"weight" must be a positive number, not {weight!r}')
        ok = False
    if not ok:
        return None
    return Rule(metrics=tuple(names), full=float(full), zero=float(zero), per=per, track=track, weight=float(weight))
