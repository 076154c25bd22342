"""Synthetic judge reports in the judge's shape, and stored results rescored, for the rubric tests and
bench/rescore.py (the service rescores through grader.app.coursework.rescore)."""
from rubric import diff_scores, diff_totals, score


def make_report(statuses: dict, metrics: dict | None = None, track: str | None = "lm") -> dict:
    """A report with one check per entry of statuses {check_id: status}, metrics {check_id: {...}} where given."""
    metrics = metrics or {}
    checks = [{"id": cid, "status": status, "message": f"{cid} {status}", "metrics": dict(metrics.get(cid, {})),
               "details": [], "duration_s": 0.0, "stdout": ""} for cid, status in statuses.items()]
    summary = {}
    for c in checks:
        summary[c["status"]] = summary.get(c["status"], 0) + 1
    return {"grader": {"version": "test", "contract": 1}, "seed": 0,
            "submission": {"name": "submission.py", "bytes": 0, "sha256": "0" * 64, "track": track},
            "checks": checks, "summary": summary, "timings": {"total_s": 1.0}}


def rescore(stored, rubric) -> list[dict]:
    """Score every stored result again under `rubric`, without running any code.

    `stored` holds mappings with "id", "report" (the judge's dict), optional "score" (the one stored before) and
    optional "manual" (the manual grades); each answer has the id, the new score, the totals and the changed items.
    """
    out = []
    for rec in stored:
        after = score(rec["report"], rubric, rec.get("manual"))
        before = rec.get("score")
        out.append({"id": rec.get("id"), "score": after, "totals": diff_totals(before, after),
                    "changes": [r for r in diff_scores(before, after) if r["changed"]]})
    return out
