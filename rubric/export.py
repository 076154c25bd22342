"""Exports: a CSV gradebook and a Gradescope results.json per submission."""
import csv
import io

# Gradescope shows "after_published" results once the instructor publishes grades: our "hidden until released".
GRADESCOPE_VISIBILITY = {True: "visible", False: "after_published"}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # spreadsheets run cells starting with these as formulas


def number_cell(value) -> str:
    """repr of a float is its shortest exact form, so csv reads back the very same number; None is an empty cell."""
    return "" if value is None else repr(float(value))


def text_cell(value) -> str:
    """Text that a spreadsheet will not run as a formula (CSV injection), prefixed with ' when it could."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


# Who and which submission, before the points; a row without one of them (an older caller) leaves its cell empty.
GRADEBOOK_FIRST = ("student", "name", "email", "state", "submission", "submitted_at")


def gradebook_csv(rows) -> str:
    """A row per student: who (roster id, name, e-mail, roster state), the counted submission's id and time, a column
    per category, then the late penalty (fraction and points), total, max, pending manual items and rubric version.

    Each row is a mapping with "student" and "score" (a score dict, or None for a student with nothing counted),
    and optionally the other GRADEBOOK_FIRST keys (submitted_at a datetime or an ISO string).
    """
    rows = list(rows)
    categories = []
    for row in rows:  # union in first-seen order, in case rows come from different rubric versions
        for cat in (row.get("score") or {}).get("categories", []):
            if cat["id"] not in categories:
                categories.append(cat["id"])
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*GRADEBOOK_FIRST, *categories, "late_penalty_fraction", "late_penalty", "total", "max",
                     "pending_manual", "rubric_version"])
    for row in rows:
        s = row.get("score") or {}
        points = {c["id"]: c["points"] for c in s.get("categories", [])}
        late = s.get("late_penalty") or {}
        writer.writerow([*(text_cell(time_text(row.get(key))) for key in GRADEBOOK_FIRST),
                         *(number_cell(points.get(c)) for c in categories),
                         number_cell(late.get("fraction", 0.0) if s else None),
                         number_cell(late.get("points", 0.0) if s else None),
                         number_cell(s.get("total")), number_cell(s.get("max")),
                         len(s.get("pending_manual", [])) if s else "", text_cell(s.get("rubric_version"))])
    return out.getvalue()


def time_text(value):
    """A datetime as ISO 8601 UTC (naive datetimes are UTC here), anything else as it is."""
    if hasattr(value, "isoformat"):
        return value.isoformat(timespec="seconds") + ("Z" if getattr(value, "tzinfo", None) is None else "")
    return value


def gradescope_results(report: dict, score: dict) -> dict:
    """Gradescope's results.json: a test per automatic item and per graded manual item, the score their sum.

    Pending manual items are left out (Gradescope grades those in its own manual questions) and the late penalty
    is not applied (Gradescope applies its own late policy), so score = the sum of the tests' scores.
    """
    checks = {c.get("id"): c for c in report.get("checks", [])}
    tests = []
    for n, cat in enumerate(score["categories"], 1):
        for m, item in enumerate(cat["items"], 1):
            if item["status"] == "pending":
                continue
            tests.append({"name": f"{cat['title']}: {item['title']}", "number": f"{n}.{m}",
                          "score": item["points"], "max_score": item["max"],
                          "status": "passed" if item["points"] >= item["max"] else "failed",
                          "output": item_output(item, checks.get(item.get("check"))),
                          "visibility": GRADESCOPE_VISIBILITY[bool(item["visible"])],
                          "tags": [cat["id"], item.get("check") or "manual"]})
    pending = score.get("pending_manual", [])
    output = f"Graded with rubric {score['rubric_version']}."
    if pending:
        output += f" Graded by hand later: {', '.join(pending)}."
    return {"score": sum_points(t["score"] for t in tests),
            "execution_time": round(report.get("timings", {}).get("total_s") or 0), "output": output,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests,
            "extra_data": {"rubric_version": score["rubric_version"], "pending_manual": pending,
                           "sha256": report.get("submission", {}).get("sha256")}}


def item_output(item: dict, check: dict | None) -> str:
    """What a student reads under a test: how the points were decided, then the check's own message and details."""
    lines = [item.get("note") or ""]
    if check:
        lines.append(check.get("message", ""))
        lines += [f"- {d}" for d in check.get("details", [])]
    return "\n".join(line for line in lines if line)


def sum_points(values) -> float:
    """A sum of two-decimal points without float noise."""
    return round(sum(values), 6)
