"""Class analytics for one assignment: pass rate per check, failures grouped by diagnosis, points per rubric item,
submissions over time, and the slowest and failing gradings; JSON-ready dicts and CSV rows.

Read from stored data only, in a fixed number of queries whatever the class size (the submissions of the assignment
in one, their latest results and scores in a few chunked ones, the attempts in one): no query per submission.
The checks' numbers come from the results of the counted submissions (rules.counted_submissions, one per student)
or of every graded submission (basis "all"); the timeline and the gradings always cover every submission.
"""
import csv
import io
import re
import statistics
from collections import Counter
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..feedback import FUNCTIONS, diagnosis, title
from ..registry import check_ids
from ..results import CHECK_STATUSES
from . import coursework, rules
from .models import Assignment, Attempt, Student, Submission
from .store import StoreError

BASES = ("counted", "all")
BUCKETS = ("hour", "day")
PARTS = ("checks", "diagnoses", "items", "timeline", "slowest", "failing")
FAILED = ("fail", "error", "timeout", "oom", "crash")  # a check's failure; skipped is a consequence, counted apart
EXAMPLES = 5  # example submissions named per diagnosis
SLOWEST = 10
MAX_HOURS = 24 * 14  # beyond two weeks of hours the timeline goes by day
# What differs between two reports of one bug: index lists (x[0, 3, 12:18]), then numbers (values, positions, counts,
# line numbers). A number inside a word (float64, x2, Dh) stays: it names something.
INDEX = re.compile(r"\[[^\[\]]*\d[^\[\]]*\]")
NUMBER = re.compile(r"(?<!\w)(?<!\d\.)[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?(?!\w)")
SPACES = re.compile(r"\s+")
TRACE_WHERE = re.compile(r"^(?P<where>line #, in [\w.<>]+)")  # an error's traceback line, normalised


def normalise(text: str) -> str:
    """The message with its numbers and index lists replaced by placeholders, so one bug's reports read the same."""
    return SPACES.sub(" ", NUMBER.sub("#", INDEX.sub("[…]", str(text or "")))).strip()


# ---------------------------------------------------------------- the graded submissions

def roster_submissions(s: Session, assignment: Assignment) -> list[tuple[Submission, str]]:
    """Every submission of the assignment by a student still on the roster, with the username, oldest first."""
    q = (select(Submission, Student.username).join(Student, Student.id == Submission.student_id)
         .where(Submission.assignment_id == assignment.id, Student.removed_at.is_(None)).order_by(Submission.id))
    return [(sub, username) for sub, username in s.execute(q).all()]


def counted_ids(s: Session, assignment: Assignment) -> set[int]:
    """The ids of the submissions that count, one per student (the assignment's rule: best, latest or chosen)."""
    return {sub.id for sub in rules.counted_submissions(s, assignment).values() if sub is not None}


def graded(s: Session, assignment: Assignment, subs: list, basis: str) -> list[dict]:
    """{"sub", "student", "report", "score"} for each submission of the basis that has a result."""
    if basis not in BASES:
        raise StoreError(f'basis must be "counted" or "all", not {basis!r}')
    chosen = counted_ids(s, assignment) if basis == "counted" else None
    picked = [(sub, name) for sub, name in subs if chosen is None or sub.id in chosen]
    found = coursework.current_scores(s, [sub.id for sub, _ in picked])
    out = []
    for sub, name in picked:
        result, score = found.get(sub.id, (None, None))
        if result is not None and isinstance(result.report, dict):
            out.append({"sub": sub, "student": name, "report": result.report, "score": score.score if score else None})
    return out


def check_order(assignment: Assignment, records: list[dict]) -> list[str]:
    """The assignment's checks in contract order, then any other check the reports name."""
    known = list(assignment.checks or []) or list(check_ids())
    order = {cid: i for i, cid in enumerate(check_ids())}
    seen = dict.fromkeys(sorted(known, key=lambda c: order.get(c, len(order))))
    for r in records:
        for c in r["report"].get("checks") or []:
            if isinstance(c, dict) and isinstance(c.get("id"), str):
                seen.setdefault(c["id"])
    return list(seen)


# ---------------------------------------------------------------- 1. pass rate per check

def pass_rates(checks: list[str], records: list[dict]) -> list[dict]:
    """Per check: how many of the reports have it at each status, and the pass rate among them."""
    counts = {cid: Counter() for cid in checks}
    for r in records:
        for c in r["report"].get("checks") or []:
            if isinstance(c, dict) and c.get("id") in counts:
                counts[c["id"]][str(c.get("status"))] += 1
    rows = []
    for cid in checks:
        n = sum(counts[cid].values())
        row = {"check": cid, "title": title(cid), "reports": n,
               **{status: counts[cid].get(status, 0) for status in CHECK_STATUSES}}
        row["pass_rate"] = round(row["pass"] / n, 4) if n else None
        rows.append(row)
    return rows


# ---------------------------------------------------------------- 2. failures grouped by diagnosis

def diagnosis_key(check: dict) -> tuple[tuple, dict]:
    """The group a failing check belongs to and how it is described: its root cause when the judge found one (the
    contract function whose correct version makes it pass), else its own diagnosis with the numbers taken out."""
    cid, status = str(check.get("id")), str(check.get("status"))
    cause = check.get("root_cause")
    if isinstance(cause, dict) and isinstance(cause.get("check"), str):
        found = FUNCTIONS.search(str(cause.get("evidence") or ""))
        names = found["names"] if found else cause["check"]
        text = f"with a correct {names} in place of the student's, {cid} passes"
        return (cid, "root_cause", cause["check"]), {"diagnosis": text, "root_cause": cause["check"],
                                                      "functions": names}
    found = diagnosis(check)
    text = normalise(found["text"])
    where = TRACE_WHERE.match(normalise(found["where"])) if status == "error" else None
    if where:  # an error is the same bug where it raised in the same function
        text = f"{text} ({where['where']})"
    return (cid, status, text), {"diagnosis": text, "root_cause": None, "functions": ""}


def diagnoses(records: list[dict], order: list[str]) -> list[dict]:
    """Every failure of the reports in groups of one check and one diagnosis; most students first."""
    groups: dict[tuple, dict] = {}
    for r in records:
        for c in r["report"].get("checks") or []:
            if not isinstance(c, dict) or c.get("status") not in FAILED:
                continue
            key, described = diagnosis_key(c)
            g = groups.get(key)
            if g is None:
                g = groups[key] = {"check": key[0], "title": title(key[0]),
                                   "status": "fail" if key[1] == "root_cause" else key[1], **described,
                                   "students": set(), "submissions": 0, "examples": []}
            g["students"].add(r["student"])
            g["submissions"] += 1
            if len(g["examples"]) < EXAMPLES and r["student"] not in {e["student"] for e in g["examples"]}:
                g["examples"].append({"submission": r["sub"].id, "student": r["student"],
                                      "message": str(c.get("message") or "")})
    place = {cid: i for i, cid in enumerate(order)}
    rows = [{**g, "students": len(g["students"])} for g in groups.values()]
    rows.sort(key=lambda g: (-g["students"], -g["submissions"], place.get(g["check"], len(place)), g["diagnosis"]))
    return rows


# ---------------------------------------------------------------- 3. points per rubric item

def summary(values: list[float], top: float | None) -> dict:
    """n, mean, median, lowest, highest, and how many got full marks and how many none."""
    if not values:
        return {"n": 0, "mean": None, "median": None, "lowest": None, "highest": None, "full": 0, "zero": 0}
    return {"n": len(values), "mean": round(statistics.fmean(values), 4), "median": statistics.median(values),
            "lowest": min(values), "highest": max(values),
            "full": sum(1 for v in values if top is not None and v >= top - 1e-9),
            "zero": sum(1 for v in values if v == 0)}


def item_points(s: Session, assignment: Assignment, records: list[dict]) -> dict:
    """Per rubric item, category and the total: the points of each scored report (a manual item not graded yet is
    counted apart as pending, not as zero)."""
    total = {"id": "total", "title": "Total", "max": None, "values": []}
    categories: dict[str, dict] = {}
    items: dict[str, dict] = {}
    rubric = rules.rubric_for(s, assignment)  # the pinned rubric: the items' order, titles and maxima
    for cat in rubric.categories if rubric is not None else []:  # the rubric's order, items nobody scored included
        categories[cat.id] = {"id": cat.id, "title": cat.title, "max": cat.weight, "values": []}
        for item in cat.items:
            items[item.id] = {"id": item.id, "title": item.title, "category": cat.id, "kind": item.kind,
                              "check": item.check, "max": item.points, "values": [], "pending": 0}
    scored = [r["score"] for r in records if isinstance(r.get("score"), dict)]
    for sc in scored:
        total["values"].append(float(sc.get("total") or 0.0))
        total["max"] = sc.get("max", total["max"])
        for cat in sc.get("categories") or []:
            c = categories.setdefault(cat["id"], {"id": cat["id"], "title": cat.get("title", cat["id"]),
                                                  "max": cat.get("max"), "values": []})
            c["values"].append(float(cat.get("points") or 0.0))
            for it in cat.get("items") or []:
                i = items.setdefault(it["id"], {"id": it["id"], "title": it.get("title", it["id"]),
                                                "category": cat["id"], "kind": it.get("kind"), "check": it.get("check"),
                                                "max": it.get("max"), "values": [], "pending": 0})
                if it.get("status") == "pending":
                    i["pending"] += 1
                else:
                    i["values"].append(float(it.get("points") or 0.0))
    if total["max"] is None and rubric is not None:
        total["max"] = rubric.total
    for entry in [total, *categories.values(), *items.values()]:
        entry.update(summary(entry["values"], entry["max"]))
    return {"scored": len(scored), "total": total, "categories": list(categories.values()),
            "items": list(items.values())}


# ---------------------------------------------------------------- 4. over time, slowest, failing

def zone_of(s: Session, assignment: Assignment) -> ZoneInfo | timezone:
    """The course's timezone (the assignment's rules), for day and hour boundaries; UTC when it names none."""
    try:
        return ZoneInfo(rules.rules_for(s, assignment).timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):  # the rules are checked when set; an old row may still hold junk
        return timezone.utc


def timeline(subs: list, zone, bucket: str | None = None) -> dict:
    """Uploads per hour or per day (by default hours over at most three days, else days), empty buckets included."""
    if bucket is not None and bucket not in BUCKETS:
        raise StoreError(f'bucket must be "hour" or "day", not {bucket!r}')
    stamped = sorted((sub.created_at.replace(tzinfo=timezone.utc).astimezone(zone), name) for sub, name in subs)
    times = [t for t, _ in stamped]
    if bucket is None:
        bucket = "hour" if times and times[-1] - times[0] <= timedelta(days=3) else "day"
    if bucket == "hour" and times and (times[-1] - times[0]) > timedelta(hours=MAX_HOURS):
        bucket = "day"

    def floor(t: datetime) -> datetime:
        return t.replace(minute=0, second=0, microsecond=0) if bucket == "hour" else \
            t.replace(hour=0, minute=0, second=0, microsecond=0)
    counts, students = Counter(), {}
    for t, name in stamped:
        counts[floor(t)] += 1
        students.setdefault(floor(t), set()).add(name)
    rows = []
    if times:
        step = timedelta(hours=1) if bucket == "hour" else timedelta(days=1)
        at, last = floor(times[0]), floor(times[-1])
        while at <= last:
            rows.append({"start": at.isoformat(timespec="minutes"), "submissions": counts.get(at, 0),
                         "students": len(students.get(at, ()))})
            # the wall clock of the next hour or day, through UTC so a DST change is not a gap or a repeat
            at = floor((at.astimezone(timezone.utc) + step).astimezone(zone)) if bucket == "hour" else \
                floor((at + step + timedelta(hours=3)).astimezone(zone))
    return {"bucket": bucket, "timezone": str(zone), "rows": rows, "submissions": len(times)}


def seconds(start: datetime | None, end: datetime | None) -> float | None:
    return round((end - start).total_seconds(), 3) if start and end else None


def slowest(s: Session, subs: list, limit: int = SLOWEST) -> list[dict]:
    """The gradings that took longest (the last claim's start to its result), with the judge's own timings."""
    done = [(sub, name, seconds(sub.started_at, sub.finished_at)) for sub, name in subs if sub.status == "done"]
    done = sorted((d for d in done if d[2] is not None), key=lambda d: (-d[2], d[0].id))[:limit]
    found = coursework.current_scores(s, [sub.id for sub, _, _ in done])
    rows = []
    for sub, name, took in done:
        result = found.get(sub.id, (None, None))[0]
        report = result.report if result is not None and isinstance(result.report, dict) else {}
        timings = report.get("timings") if isinstance(report.get("timings"), dict) else {}
        checks = [c for c in report.get("checks") or [] if isinstance(c, dict)
                  and isinstance(c.get("duration_s"), (int, float))]
        worst = max(checks, key=lambda c: c["duration_s"], default=None)
        rows.append({"submission": sub.id, "student": name, "request": sub.request, "seconds": took,
                     "judge_s": timings.get("total_s"), "sandbox_start_s": timings.get("sandbox_start_s"),
                     "torch_import_s": timings.get("torch_import_s"),
                     "slowest_check": worst.get("id") if worst else None,
                     "slowest_check_s": worst.get("duration_s") if worst else None,
                     "finished_at": sub.finished_at, "worker": sub.worker})
    return rows


def failing(s: Session, assignment: Assignment, subs: list) -> list[dict]:
    """Gradings the infrastructure gave up on (status failed), and those it retried before a result: how many
    claims ended how, and the last message; gave-up first, newest first."""
    outcomes: dict[int, Counter] = {}
    last: dict[int, tuple] = {}
    q = (select(Attempt.submission_id, Attempt.outcome, Attempt.message, Attempt.id)
         .join(Submission, Submission.id == Attempt.submission_id)
         .where(Submission.assignment_id == assignment.id).order_by(Attempt.id))
    for sid, outcome, message, _ in s.execute(q).all():
        outcomes.setdefault(sid, Counter())[outcome or "running"] += 1
        if outcome in ("retry", "failed", "lost"):
            last[sid] = (outcome, message)
    rows = []
    for sub, name in subs:
        tried = outcomes.get(sub.id, Counter())
        troubled = sum(tried.get(o, 0) for o in ("retry", "failed", "lost"))
        if sub.status != "failed" and not troubled:
            continue
        rows.append({"submission": sub.id, "student": name, "status": sub.status, "request": sub.request,
                     "attempts": sum(tried.values()), "outcomes": dict(tried),
                     "error": sub.error, "last_problem": (last.get(sub.id) or (None, None))[1],
                     "finished_at": sub.finished_at})
    rows.sort(key=lambda r: (r["status"] != "failed", -r["submission"]))
    return rows


# ---------------------------------------------------------------- all of it

def class_analytics(s: Session, assignment: Assignment, basis: str = "counted", bucket: str | None = None,
                    parts=PARTS) -> dict:
    """What the analytics page and the API show for the assignment: every part, or only `parts` (the reports are
    read only for checks, diagnoses and items)."""
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise StoreError(f"no analytics part {unknown[0]!r}; the parts are {', '.join(PARTS)}", 404)
    if basis not in BASES:
        raise StoreError(f'basis must be "counted" or "all", not {basis!r}')
    if bucket is not None and bucket not in BUCKETS:
        raise StoreError(f'bucket must be "hour" or "day", not {bucket!r}')
    subs = roster_submissions(s, assignment)
    reading = {"checks", "diagnoses", "items"} & set(parts)
    records = graded(s, assignment, subs, basis) if reading else []
    order = check_order(assignment, records)
    out = {"assignment": assignment.slug, "title": assignment.title, "basis": basis,
           "counts": rules.rules_for(s, assignment).counts, "students": len({name for _, name in subs}),
           "submissions": len(subs), "graded": len(records) if reading else None}
    makers = {"checks": lambda: pass_rates(order, records), "diagnoses": lambda: diagnoses(records, order),
              "items": lambda: item_points(s, assignment, records),
              "timeline": lambda: timeline(subs, zone_of(s, assignment), bucket),
              "slowest": lambda: slowest(s, subs), "failing": lambda: failing(s, assignment, subs)}
    out.update({part: makers[part]() for part in PARTS if part in parts})
    return out


# ---------------------------------------------------------------- CSV rows

def iso(dt) -> str | None:
    return dt.isoformat(timespec="seconds") + "Z" if isinstance(dt, datetime) and dt.tzinfo is None else \
        (dt.isoformat(timespec="seconds") if isinstance(dt, datetime) else dt)


def table(data: dict, part: str) -> tuple[list[str], list[list]]:
    """One part of class_analytics as a header and rows (what the CSV downloads hold)."""
    if part == "checks":
        head = ["check", "title", "reports", "pass_rate", *CHECK_STATUSES]
        return head, [[r[k] for k in head] for r in data["checks"]]
    if part == "diagnoses":
        head = ["check", "title", "status", "diagnosis", "root_cause", "students", "submissions", "example_submissions"]
        return head, [[g["check"], g["title"], g["status"], g["diagnosis"], g["root_cause"] or "", g["students"],
                       g["submissions"], " ".join(str(e["submission"]) for e in g["examples"])]
                      for g in data["diagnoses"]]
    if part == "items":
        head = ["kind", "id", "title", "category", "max", "n", "mean", "median", "lowest", "highest", "full", "zero",
                "pending"]
        items = data["items"]
        rows = [["total", "total", "Total", "", items["total"]["max"]]] + \
            [["category", c["id"], c["title"], "", c["max"]] for c in items["categories"]] + \
            [["item", i["id"], i["title"], i["category"], i["max"]] for i in items["items"]]
        entries = [items["total"], *items["categories"], *items["items"]]
        return head, [row + [e[k] for k in head[5:-1]] + [e.get("pending", "")] for row, e in zip(rows, entries)]
    if part == "timeline":
        head = ["start", "submissions", "students"]
        return head, [[r[k] for k in head] for r in data["timeline"]["rows"]]
    if part == "slowest":
        head = ["submission", "student", "request", "seconds", "judge_s", "sandbox_start_s", "torch_import_s",
                "slowest_check", "slowest_check_s", "finished_at", "worker"]
        return head, [[iso(r[k]) for k in head] for r in data["slowest"]]
    if part == "failing":
        head = ["submission", "student", "status", "request", "attempts", "outcomes", "error", "last_problem",
                "finished_at"]
        return head, [[" ".join(f"{k}:{v}" for k, v in sorted(r["outcomes"].items())) if k == "outcomes"
                       else iso(r[k]) for k in head] for r in data["failing"]]
    raise StoreError(f"no analytics part {part!r}; the parts are {', '.join(PARTS)}", 404)


def csv_text(data: dict, part: str) -> str:
    """One part as CSV; a text cell starting with = + - @ is defused, so no spreadsheet runs it as a formula."""
    from rubric.export import text_cell  # the rubric package is optional to the app (scoring.current_rubric)
    head, rows = table(data, part)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(head)
    writer.writerows([[text_cell(v) if isinstance(v, str) else ("" if v is None else v) for v in row] for row in rows])
    return out.getvalue()
