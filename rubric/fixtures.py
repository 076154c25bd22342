"""Synthetic judge reports in the judge's shape, for tests, demos and the rescoring benchmark."""


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
