"""A stored result as the pages show it: each check with its diagnostics and where to look, points per rubric item,
the loss curve, and the live status of a grading."""
import math
import re

from sqlalchemy.orm import Session

from ...feedback import what_to_fix
from ...registry import check_ids, check_registry, hint
from .. import coursework, scoring, store, visibility
from ..api.routes import partial_verdicts, progress
from ..models import Submission, utcnow
from .charts import loss_chart
from .common import form_number

STATUS_MEANING = {
    "pass": "passed", "fail": "your code ran but broke the property", "error": "your code raised an exception",
    "timeout": "the check ran out of time", "oom": "the check ran out of memory",
    "crash": "the process died before it reported", "skipped": "skipped", "missing": "not run",
}
LARGEST = re.compile(r"largest difference is (?P<diff>\S+) at (?P<where>[^()]+?) "
                     r"\(got (?P<got>[^,]+), expected (?P<expected>[^)]+)\)")
LEAK = re.compile(r"changed the logits at earlier (?P<where>.+?) by (?P<diff>[-+0-9.eE]+)")
CURVES = ("loss_curve", "grad_norm_curve")


def number(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}" if math.isfinite(value) else str(value)


def diagnostics(check: dict) -> list[tuple[str, str]]:
    """(label, value) rows: the largest difference, where it is, what was got and expected, how many differ."""
    metrics = check.get("metrics") if isinstance(check.get("metrics"), dict) else {}
    texts = [str(check.get("message") or "")] + [str(d) for d in check.get("details") or []]
    rows = []
    found = next((m for t in texts for m in [LARGEST.search(t)] if m), None)
    leak = next((m for t in texts for m in [LEAK.search(t)] if m), None)
    if found:
        rows += [("Largest difference", found["diff"]), ("Where", found["where"]),
                 ("Got / expected", f"{found['got']} / {found['expected']}")]
    elif leak:
        rows += [("Largest change", leak["diff"]), ("Where", leak["where"])]
    else:
        for key in ("max_abs_diff", "step_max_abs_diff", "chunked_max_abs_diff", "max_leak"):
            if isinstance(metrics.get(key), (int, float)) and metrics[key]:
                rows.append(("Largest difference" if "diff" in key else "Largest change", number(metrics[key])))
                break
        if isinstance(metrics.get("worst_index"), list):
            rows.append(("Where", "index " + ", ".join(map(str, metrics["worst_index"]))))
    if isinstance(metrics.get("mismatched"), int) and isinstance(metrics.get("compared"), int) and metrics["mismatched"]:
        rows.append(("Values that differ", f"{metrics['mismatched']} of {metrics['compared']}"))
    return rows


def measured(check: dict) -> list[tuple[str, str]]:
    """Every scalar metric (curves and nested settings are shown elsewhere)."""
    metrics = check.get("metrics") if isinstance(check.get("metrics"), dict) else {}
    return [(k, number(v)) for k, v in metrics.items() if k not in CURVES and not isinstance(v, (list, dict))]


def check_rows(report: dict | None, points: dict, instructor: bool = False) -> list[dict]:
    """One entry per check of the report, with its points under the rubric (check id -> (points, max))."""
    rows = []
    for c in (report or {}).get("checks", []):
        status = str(c.get("status"))
        rows.append({"id": c.get("id"), "status": status, "meaning": STATUS_MEANING.get(status, status),
                     "message": c.get("message") or "", "details": list(c.get("details") or []),
                     "diagnostics": diagnostics(c) if status != "pass" else [], "measured": measured(c),
                     "title": getattr(check_registry().get(c.get("id")), "title", None),
                     "look_at": hint(c.get("id")) if status not in ("pass", "skipped") else None,
                     "stdout": c.get("stdout") or "", "duration_s": c.get("duration_s"),
                     "points": points.get(c.get("id")),
                     "settings": {k: v for k, v in (c.get("metrics") or {}).items() if isinstance(v, dict)}
                     if instructor else {}})
    return rows


def points_by_check(scored: dict | None) -> dict:
    if not scored:
        return {}
    from rubric import points_by_check as by_check
    return by_check(scored)


def release_dates(s: Session, assignment) -> dict:
    """Item or category id -> since when the assignment's students see it in full (a score's denominator says why):
    when its rule was set, or when its later level "full" began."""
    out = {}
    stored = visibility.stored_rules(s, assignment)
    due = visibility.current_due(s, assignment, stored)
    for key, rule in stored.items():
        if visibility.level_now(rule, due=due) == "full":
            switch = visibility.switch_time(rule, due)
            switched = rule.later_level == "full" and switch is not None and switch <= utcnow()
            out[key] = switch if switched else rule.created_at
    return out


def result_view(s: Session, sub: Submission, for_student: bool) -> dict:
    """Everything a result page shows about the submission's latest result (none while it has no result)."""
    result = store.latest_result(s, sub)
    if result is not None and result.request == sub.request and sub.status in ("queued", "running"):
        # `sub` was read before the worker committed this result and its 'done' together: read the status again, so
        # a page never shows a finished result as still running (read before the status box: the page's status)
        s.refresh(sub)
    view = {"result": result, "score": None, "checks": [], "fixes": [], "loss_chart": None, "training": None,
            "previous": None, "released": coursework.released_keys(s, sub.assignment),
            "released_on": release_dates(s, sub.assignment)}
    if result is None:
        return view
    # A student reads each check and item only as far as its feedback level allows; everything below comes from
    # that cut report (the fixes, the loss curve, the counts), so a hidden check leaks nowhere on the page.
    vis = visibility.levels(s, sub.assignment) if for_student else None
    report = visibility.student_report(result.report, vis) if for_student else result.report
    if not for_student:  # the instructor sees everything, each item tagged with what its students see
        view["levels"] = visibility.levels(s, sub.assignment).items
    row = coursework.score_of(s, result)
    scored = row.score if row else None
    if for_student:
        scored = coursework.student_score(s, sub, scored, vis)
    view["score"] = scored
    view["rubric_version"] = row.rubric_version if row else None
    view["checks"] = check_rows(report, points_by_check(scored), instructor=not for_student)
    view["fixes"] = what_to_fix(report)  # root causes first, each failure in its check's own words
    training = next((c for c in report.get("checks", []) if c.get("id") == "training"), None)
    if training is not None:
        view["training"] = training
        view["loss_chart"] = loss_chart(training.get("metrics") or {})
    previous = coursework.previous_score(s, sub, result, for_student, vis)
    if previous is not None and previous["scored"]:
        view["previous"] = previous
    view["summary"] = report.get("summary") or {}
    view["timings"] = report.get("timings") or {}
    view["current"] = sub.status == "done"
    return view


def status_json(s: Session, sub: Submission, for_student: bool = True) -> dict:
    """What the status page polls: the state, the queue position, the check in progress, and a sentence saying so.
    For a student, a check they cannot read (its feedback level) is neither named nor listed."""
    position = store.queue_position(s, sub)
    vis = visibility.levels(s, sub.assignment) if for_student and sub.status in ("queued", "running") else None
    prog = progress(sub)
    if vis is not None:
        prog = visibility.student_progress(prog, list(sub.assignment.checks or []) or list(check_ids()), vis)
    if sub.status == "queued":
        text = f"Queued: number {position} in the queue" if position else "Queued"
        if sub.request > 1:
            text += " (regrade)"
    elif sub.status == "running":
        if prog and prog.get("check"):
            step = f"check {prog['index']} of {prog['of']}: " if prog.get("index") else ""
            text = f"Running {step}{prog['check']}"
        elif prog and prog.get("phase") == "checking":  # a check the student cannot read is running: not named
            text = "Running the checks"
        else:
            text = "Running: starting the sandbox"
    elif sub.status == "done":
        text = "Graded"
    else:
        text = "Grading could not be completed on our side; your instructor can see why and regrade it"
    return {"id": sub.id, "status": sub.status, "queue_position": position, "progress": prog, "text": text,
            "finished": sub.status in ("done", "failed"), "verdicts": live_verdicts(sub, vis)}


def live_verdicts(sub: Submission, vis=None) -> list[dict]:
    """While grading runs: each check decided so far (the API's partial result, cut to a student's levels when vis
    is given), as the status box lists it."""
    if sub.status not in ("queued", "running"):
        return []
    rows = []
    for c in partial_verdicts(sub, vis):
        status = str(c.get("status"))
        rows.append({"id": c.get("id"), "status": status, "badge": {"missing": "not run"}.get(status, status),
                     "title": getattr(check_registry().get(c.get("id")), "title", None) or c.get("id"),
                     "message": str(c.get("message") or "")})
    return rows


def manual_form_items(scored: dict | None, manual: dict | None, rubric=None) -> list[dict]:
    """The rubric's manual items: description, maximum, visibility, the grade stored now and its points in the score.
    rubric: the submission's assignment's (rules.rubric_for); None: the packaged one."""
    rubric = rubric or scoring.current_rubric()
    items = {item["id"]: item for cat in (scored or {}).get("categories", []) for item in cat["items"]}
    out = []
    for cat, item in coursework.manual_items(rubric):
        grade = (manual or {}).get(item.id)
        grade = grade if isinstance(grade, dict) else {"points": grade} if grade is not None else {}
        out.append({"id": item.id, "title": item.title, "category": cat.title, "category_id": cat.id,
                    "max": item.points, "description": item.description, "visibility": item.visibility,
                    "status": items.get(item.id, {}).get("status", "pending"), "points": grade.get("points"),
                    "comment": grade.get("comment") or ""})
    return out


def manual_grades(items: list[dict], form) -> tuple[dict, dict]:
    """What a manual-grading form changes (item id -> points and comment) and what it got wrong (item id -> why);
    a blank points field leaves that item as it is. items: manual_form_items of the submission."""
    grades, errors = {}, {}
    for item in items:
        raw = form.get(f"points_{item['id']}", "")
        comment = form.get(f"comment_{item['id']}", "").strip()
        try:
            points = form_number(raw)
        except ValueError:
            errors[item["id"]] = f"{raw!r} is not a number"
            continue
        if points is None:
            continue
        if not 0 <= points <= item["max"]:
            errors[item["id"]] = f"points must be from 0 to {item['max']:g}"
            continue
        if points != item["points"] or comment != item["comment"]:
            grades[item["id"]] = {"points": points, "comment": comment}
    return grades, errors
