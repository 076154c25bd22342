"""The gradebook export on the instructor pages, as CSV and JSON: the API's rows (export.gradebook_rows), a row per
roster student with their name, e-mail, state, the counted submission's id, its points and late penalty."""
from flask import Response, abort, jsonify

from .. import store
from ..db import session
from ..export import gradebook_rows
from ..files import content_disposition
from .common import signed_in
from .instructor import bp


def rows_of(slug: str) -> list[dict]:
    s = session()
    try:
        return gradebook_rows(s, store.get_assignment(s, slug))
    except store.NotFound:
        abort(404)


@bp.get("/assignments/<slug>/export.csv")
@signed_in("instructor")
def export(slug):
    from rubric import gradebook_csv  # the rubric package is optional to the app (scoring.current_rubric)
    return Response(gradebook_csv(rows_of(slug)), mimetype="text/csv",
                    headers={"Content-Disposition": content_disposition(f"{slug}.csv")})


@bp.get("/assignments/<slug>/export.json")
@signed_in("instructor")
def export_json(slug):
    rows = [{**r, "submitted_at": r["submitted_at"].isoformat(timespec="seconds") + "Z" if r["submitted_at"] else None}
            for r in rows_of(slug)]
    response = jsonify(rows)
    response.headers["Content-Disposition"] = content_disposition(f"{slug}.json")
    return response
