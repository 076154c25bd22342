"""Class analytics in the API: the whole of it as JSON, or one part as JSON or CSV (?format=csv, or a .csv path)."""
from flask import Response, jsonify, request, url_for

from .. import analytics, store
from ..db import session
from ..files import content_disposition
from .openapi import errors, ok, op, path_param, query
from .routes import INSTRUCTOR, bp, require


def options() -> tuple[str, str | None]:
    """?basis=counted|all and ?bucket=hour|day (bad values are refused by class_analytics, named)."""
    return request.args.get("basis", "counted"), request.args.get("bucket") or None


def plain(data):
    """JSON-ready: datetimes as ISO 8601 UTC."""
    if isinstance(data, dict):
        return {k: plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [plain(v) for v in data]
    return analytics.iso(data)


def linked(data: dict) -> dict:
    """The answer with a link to each submission it names (the API's, and the instructor page's)."""
    def links(sid):
        return {"api": url_for("api.get_submission", submission_id=sid),
                "page": url_for("instructor.submission", submission_id=sid)}
    for g in data.get("diagnoses", []):
        for e in g["examples"]:
            e["links"] = links(e["submission"])
    for row in data.get("slowest", []) + data.get("failing", []):
        row["links"] = links(row["submission"])
    return data


def csv_response(data: dict, part: str, slug: str) -> Response:
    return Response(analytics.csv_text(data, part), mimetype="text/csv",
                    headers={"Content-Disposition": content_disposition(f"{slug}-{part}.csv")})


def part_of(slug: str, part: str, as_csv: bool):
    s = session()
    basis, bucket = options()
    data = analytics.class_analytics(s, store.get_assignment(s, slug), basis, bucket, parts=(part,))
    if as_csv or request.args.get("format") == "csv":
        return csv_response(data, part, slug)
    return jsonify(plain({"assignment": slug, "basis": basis, "part": part, part: linked(data)[part]}))


@bp.get("/assignments/<slug>/analytics")
@require(INSTRUCTOR)
def assignment_analytics(slug):
    """Pass rate per check, failures by diagnosis, points per item, submissions over time, slowest and failing."""
    s = session()
    basis, bucket = options()
    return jsonify(plain(linked(analytics.class_analytics(s, store.get_assignment(s, slug), basis, bucket))))


@bp.get("/assignments/<slug>/analytics/<part>")
@require(INSTRUCTOR)
def assignment_analytics_part(slug, part):
    if part.endswith(".csv"):
        return part_of(slug, part.removesuffix(".csv"), True)
    return part_of(slug, part, False)


ANALYTICS_QUERY = [query("basis", "the checks' reports: each student's counted submission, or every graded one",
                         enum=analytics.BASES),
                   query("bucket", "the timeline's buckets (default: hours over at most three days, else days)",
                         enum=analytics.BUCKETS)]


def openapi_paths() -> dict:
    """This module's routes in the OpenAPI document."""
    slug = path_param("slug")
    return {
        "/api/v1/assignments/{slug}/analytics": {
            "get": op("assignments", "Class analytics: pass rate per check, failures grouped by diagnosis, points per "
                      "rubric item, submissions over time, the slowest and the failing gradings",
                      ok({"type": "object"}) | errors(400, 401, 403, 404), [slug, *ANALYTICS_QUERY],
                      role="instructor")},
        "/api/v1/assignments/{slug}/analytics/{part}": {
            "get": op("assignments", f"One part of the class analytics ({', '.join(analytics.PARTS)}); as CSV with "
                      "?format=csv or the part's name ending in .csv",
                      {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}},
                                                               "text/csv": {"schema": {"type": "string"}}}}}
                      | errors(400, 401, 403, 404),
                      [slug, {**path_param("part"), "schema": {"type": "string", "enum": [
                          *analytics.PARTS, *(f"{p}.csv" for p in analytics.PARTS)]}}, *ANALYTICS_QUERY,
                       query("format", "csv for a CSV download", enum=["json", "csv"])], role="instructor")},
    }
