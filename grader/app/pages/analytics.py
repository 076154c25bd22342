"""The class analytics page of an assignment (instructors): pass rate per check, failures grouped by diagnosis, points
per rubric item, submissions over time, the slowest and failing gradings; each part also as a CSV download."""
from flask import Response, render_template, request

from .. import analytics, store
from ..db import session
from ..files import content_disposition
from .charts import histogram, stacked_bars, time_bars
from .common import signed_in
from .instructor import bp, get_assignment

# A check's statuses in the pass-rate chart: pass first (its share is printed), the harness's endings together.
SEGMENTS = [("pass", "pass", "#1d7a3e"), ("fail", "fail", "#c0392b"), ("error", "error", "#a35800"),
            ("other", "timeout, oom or crash", "#7046a6"), ("skipped", "skipped", "#8a919e")]
BASIS_TEXT = {"counted": "the submission that counts for each student", "all": "every graded submission"}


def charts(data: dict) -> dict:
    """The page's SVG charts, drawn from the same numbers as its tables."""
    rows = [(c["title"], {"pass": c["pass"], "fail": c["fail"], "error": c["error"], "skipped": c["skipped"],
                          "other": c["timeout"] + c["oom"] + c["crash"]}) for c in data["checks"]]
    items = data["items"]
    unit = "student" if data["basis"] == "counted" else "report"  # all: a student may be counted several times

    def hist(entry, title, **size):
        return histogram(entry["values"], entry["max"], title=title, unit=unit, **size)
    bucket = data["timeline"]["bucket"]
    times = [(r["start"][5:16].replace("T", " ") if bucket == "hour" else r["start"][:10], r["submissions"])
             for r in data["timeline"]["rows"]]
    return {"checks": stacked_bars(rows, SEGMENTS, title="Checks: share of reports by status", unit="reports"),
            "total": hist(items["total"], "Total", width=720, height=230),
            "categories": [hist(c, f"{c['title']} (of {c['max']:g})") for c in items["categories"] if c["max"]],
            "items": {i["id"]: hist(i, f"{i['title']} (of {i['max']:g})") for i in items["items"] if i["max"]},
            "timeline": time_bars(times, title=f"Uploads per {bucket} ({data['timeline']['timezone']})", width=1200)}


@bp.get("/assignments/<slug>/analytics")
@signed_in("instructor")
def analytics_page(slug):
    """The class at a glance: ?basis=counted|all for the checks' numbers, ?bucket=hour|day for the timeline."""
    s = session()
    a = get_assignment(slug)
    basis = request.args.get("basis", "counted")
    bucket = request.args.get("bucket") or None
    if basis not in analytics.BASES or (bucket is not None and bucket not in analytics.BUCKETS):
        raise store.StoreError("basis is counted or all, and bucket is hour or day")
    data = analytics.class_analytics(s, a, basis, bucket)
    return render_template("instructor/analytics.html", a=a, data=data, charts=charts(data), basis=basis,
                           bucket=bucket, basis_text=BASIS_TEXT, parts=analytics.PARTS)


@bp.get("/assignments/<slug>/analytics/<part>.csv")
@signed_in("instructor")
def analytics_csv(slug, part):
    """One part of the page as CSV, as the API's (the page's own sign-in, so the download links work)."""
    data = analytics.class_analytics(session(), get_assignment(slug), request.args.get("basis", "counted"),
                                     request.args.get("bucket") or None, parts=(part,))
    return Response(analytics.csv_text(data, part), mimetype="text/csv",
                    headers={"Content-Disposition": content_disposition(f"{slug}-{part}.csv")})
