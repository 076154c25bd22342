"""Class analytics (grader/app/analytics.py and its API): pass rate per check over the counted or every submission,
failures grouped by diagnosis (one bug with other numbers is one group; a root cause groups under its function),
points per rubric item, uploads over time, the slowest and the failing gradings; JSON and CSV; a bounded number of
queries whatever the class size."""
import csv
import io
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, update

from grader.app import accounts, analytics, store
from grader.app.accounts import issue_token
from grader.app.db import get_db
from grader.app.models import Student, Submission
from tests.feedback.reports import ALL, SCALE, SPLIT, report, split_root_cause
from worker import grading

from .svc_helpers import Course, judge_returning, make_course

REFERENCE = (Path(__file__).resolve().parents[2] / "submissions" / "reference_lm.py").read_bytes()
URL = "/api/v1/assignments/cap"
# The same two bugs as another student's run reports them: other positions, values and counts.
SPLIT_OTHER = (SPLIT.replace("[0, 2, 3]", "[1, 0, 5]").replace("x[0, 3, 12:18]", "x[1, 5, 0:6]")
               .replace("216 of 240", "230 of 256").replace("3.91", "2.07").replace("-2.13078", "0.3114")
               .replace("1.78003", "-1.7597"))
SCALE_OTHER = SCALE.replace("0.471", "0.388").replace("0.8749", "0.61").replace("0.40417", "0.222")


def submit(app, token: str, n: int) -> int:
    client = app.test_client()
    r = client.post(f"{URL}/submissions", headers=Course.auth(token), content_type="multipart/form-data",
                    data={"file": (io.BytesIO(REFERENCE + f"# {n}\n".encode()), f"v{n}.py")})
    assert r.status_code == 202, r.get_json()
    return r.get_json()["id"]


def graded(app, token: str, n: int, rep: dict) -> int:
    sid = submit(app, token, n)
    assert grading.grade(app, sid, judge=judge_returning(rep)).status == "graded"
    return sid


def scale_bug(message: str = SCALE) -> dict:
    return report({}, attention_sdpa={"status": "fail", "message": message + " (and 7 more problems)",
                                      "details": [message]})


def split_bug(message: str = SPLIT) -> dict:
    return report({}, split_heads={"status": "fail", "message": message, "details": [message]})


def not_written() -> dict:
    return report({}, rope={"status": "error", "message": "your code raised NotImplementedError: write apply_rope",
                            "details": ['line 78, in apply_rope: raise NotImplementedError("write apply_rope")']},
                  evaluation={"status": "skipped", "message": "not run: it needs what training produces"})


@pytest.fixture
def klass(app):
    """alice: the split bug with its root causes, then a clean pass (best counts: the pass); bob: the split bug with
    other numbers; carol: the scale bug; dave: rope not written; all on the course's every check."""
    course = make_course(app, checks=list(ALL))
    with app.app_context(), get_db(app).session() as s:
        for name in ("carol", "dave"):
            setattr(course, name, issue_token(s, "student", accounts.add_student(s, name, name.title()))[1])
        s.commit()
    ids = {"alice1": graded(app, course.alice, 1, split_root_cause()),
           "alice2": graded(app, course.alice, 2, report({})),
           "bob": graded(app, course.bob, 3, split_bug(SPLIT_OTHER)),
           "carol": graded(app, course.carol, 4, scale_bug(SCALE_OTHER)),
           "dave": graded(app, course.dave, 5, not_written())}
    return course, ids


def analytics_of(app, basis="counted", bucket=None) -> dict:
    with app.app_context(), get_db(app).session() as s:
        return analytics.class_analytics(s, store.get_assignment(s, "cap"), basis, bucket)


def row(rows, key, value) -> dict:
    found = [r for r in rows if r[key] == value]
    assert len(found) == 1, f"expected one row with {key}={value!r}, got {found}"
    return found[0]


# ---------------------------------------------------------------- normalising a message

@pytest.mark.parametrize("one, other", [
    (SPLIT, SPLIT_OTHER),
    (SCALE, SCALE_OTHER),
    ("line 40, in split_heads: got -1.5e-03 at [0, 2, 2]", "line 41, in split_heads: got 2E+4 at [1, 0, 7]"),
])
def test_one_bug_with_other_numbers_normalises_to_one_text(one, other):
    assert one != other
    assert analytics.normalise(one) == analytics.normalise(other)


@pytest.mark.parametrize("kept", ["float64", "x2", "log10", "mask 'none'", "(B, T, H, Dh)"])
def test_a_number_inside_a_name_is_kept(kept):
    assert kept in analytics.normalise(f"compared {kept} at 3 positions"), "a name must survive normalising"


def test_different_bugs_stay_different():
    assert analytics.normalise(SPLIT) != analytics.normalise(SCALE)
    assert "#" in analytics.normalise("got 0.5, expected 1") and "0.5" not in analytics.normalise("got 0.5")


# ---------------------------------------------------------------- 1. pass rate per check

def test_pass_rate_per_check_counts_the_counted_submissions(klass, app):
    data = analytics_of(app)
    assert data["basis"] == "counted" and data["counts"] == "best"
    assert data["students"] == 4 and data["graded"] == 4, "one counted report per student (alice's best: the pass)"
    split = row(data["checks"], "check", "split_heads")
    assert (split["pass"], split["fail"], split["reports"], split["pass_rate"]) == (3, 1, 4, 0.75), split
    rope = row(data["checks"], "check", "rope")
    assert (rope["pass"], rope["error"]) == (3, 1), rope
    evaluation = row(data["checks"], "check", "evaluation")
    assert (evaluation["skipped"], evaluation["pass_rate"]) == (1, 0.75), evaluation
    assert [c["check"] for c in data["checks"]] == list(ALL), "contract order"
    assert split["title"] and split["title"] != "split_heads", "checks are named by title"


def test_all_submissions_counts_every_graded_one(klass, app):
    data = analytics_of(app, "all")
    assert data["graded"] == 5
    assert row(data["checks"], "check", "split_heads")["fail"] == 2, "alice's first upload counts too"
    assert row(data["checks"], "check", "causality")["fail"] == 1


# ---------------------------------------------------------------- 2. failures by diagnosis

def test_one_bug_in_several_students_is_one_group_with_examples(klass, app):
    course, ids = klass
    groups = analytics_of(app, "all")["diagnoses"]
    split = [g for g in groups if g["check"] == "split_heads"]
    assert len(split) == 1, f"alice's and bob's split bug differ only in numbers: {split}"
    g = split[0]
    assert (g["students"], g["submissions"], g["status"]) == (2, 2, "fail")
    assert {e["submission"] for e in g["examples"]} == {ids["alice1"], ids["bob"]}
    assert any("216 of 240" in e["message"] for e in g["examples"]), "examples keep their own messages"
    assert "reshape to (B, T, H, Dh) first" in g["diagnosis"] and "3.91" not in g["diagnosis"]
    assert groups[0]["students"] >= groups[-1]["students"], "most students first"


def test_a_failure_with_a_root_cause_groups_under_the_function(klass, app):
    groups = analytics_of(app, "all")["diagnoses"]
    caused = [g for g in groups if g["root_cause"]]
    assert {g["check"] for g in caused} == {"causality", "padding", "kv_cache"}
    assert all(g["root_cause"] == "split_heads" and g["functions"] == "split_heads" for g in caused)
    training = row(groups, "check", "training")
    assert training["root_cause"] is None, "training has no root cause of its own"


def test_an_error_names_where_it_raised_and_skipped_is_not_a_failure(klass, app):
    groups = analytics_of(app)["diagnoses"]
    rope = row(groups, "check", "rope")
    assert rope["status"] == "error" and "line #, in apply_rope" in rope["diagnosis"], rope
    assert not [g for g in groups if g["check"] == "evaluation"], "a skipped check is counted, not a diagnosis"
    scale = row(groups, "check", "attention_sdpa")
    assert "without the #/√Dh scale" in scale["diagnosis"] and "more problems" not in scale["diagnosis"]


# ---------------------------------------------------------------- 3. points per rubric item

def test_points_per_item_category_and_total(klass, app):
    items = analytics_of(app)["items"]
    assert items["scored"] == 4
    split = next(i for i in items["items"] if i["check"] == "split_heads")
    assert split["n"] == 4 and split["full"] == 3 and split["zero"] == 1, split
    assert split["highest"] == split["max"] and split["lowest"] == 0
    manual = [i for i in items["items"] if i["kind"] == "manual"]
    assert manual and all(i["pending"] == 4 and i["n"] == 0 for i in manual), "ungraded manual items are pending"
    assert items["total"]["n"] == 4 and items["total"]["max"] > 0
    assert len(items["total"]["values"]) == 4
    assert sum(c["max"] for c in items["categories"]) == pytest.approx(items["total"]["max"])


# ---------------------------------------------------------------- 4. over time, slowest, failing

def set_times(app, times: dict) -> None:
    """submission id -> (created_at, started_at, finished_at), any of them None to leave it."""
    with get_db(app).Session() as s:
        for sid, (created, started, finished) in times.items():
            values = {k: v for k, v in (("created_at", created), ("started_at", started),
                                        ("finished_at", finished)) if v is not None}
            s.execute(update(Submission).where(Submission.id == sid).values(**values))
        s.commit()


def test_uploads_per_hour_and_per_day_with_empty_buckets(klass, app):
    _, ids = klass
    t0 = datetime(2026, 12, 1, 9, 10)
    set_times(app, {ids["alice1"]: (t0, None, None), ids["alice2"]: (t0 + timedelta(minutes=20), None, None),
                    ids["bob"]: (t0 + timedelta(hours=3), None, None),
                    ids["carol"]: (t0 + timedelta(hours=3, minutes=5), None, None),
                    ids["dave"]: (t0 + timedelta(hours=3, minutes=40), None, None)})
    hours = analytics_of(app)["timeline"]
    assert hours["bucket"] == "hour" and hours["timezone"] == "UTC"
    assert [(r["start"], r["submissions"], r["students"]) for r in hours["rows"]] == [
        ("2026-12-01T09:00+00:00", 2, 1), ("2026-12-01T10:00+00:00", 0, 0), ("2026-12-01T11:00+00:00", 0, 0),
        ("2026-12-01T12:00+00:00", 3, 3)]
    days = analytics_of(app, bucket="day")["timeline"]
    assert [(r["start"][:10], r["submissions"]) for r in days["rows"]] == [("2026-12-01", 5)]


def test_the_timeline_goes_by_day_in_the_assignments_time_zone(klass, app):
    _, ids = klass
    with app.app_context(), get_db(app).session() as s:
        store.update_assignment(s, "cap", timezone="Europe/Berlin")
        s.commit()
    t0 = datetime(2026, 12, 1, 23, 30)  # UTC: already 2 December in Berlin
    set_times(app, {sid: (t0 + timedelta(days=2 * i), None, None) for i, sid in enumerate(ids.values())})
    data = analytics_of(app)["timeline"]
    assert data["bucket"] == "day" and data["timezone"] == "Europe/Berlin"
    starts = [r["start"] for r in data["rows"]]
    assert starts[0] == "2026-12-02T00:00+01:00" and len(starts) == 9, starts
    assert [r["submissions"] for r in data["rows"]] == [1, 0] * 4 + [1]


def test_slowest_gradings_come_first_with_the_judges_timings(klass, app):
    _, ids = klass
    t0 = datetime(2026, 12, 1, 9, 0)
    set_times(app, {ids["bob"]: (None, t0, t0 + timedelta(seconds=95)),
                    ids["carol"]: (None, t0, t0 + timedelta(seconds=30)),
                    ids["dave"]: (None, t0, t0 + timedelta(seconds=400))})
    rows = analytics_of(app)["slowest"]
    assert [r["submission"] for r in rows[:3]] == [ids["dave"], ids["bob"], ids["carol"]]
    assert rows[0]["seconds"] == 400 and rows[0]["student"] == "dave"
    assert rows[0]["judge_s"] == 0.1 and rows[0]["slowest_check"] in ALL


def test_failing_gradings_name_the_error_and_the_retried_ones(app):
    course = make_course(app, checks=list(ALL))
    app.config.update(MAX_ATTEMPTS=2, RETRY_BACKOFF_S=0.0)

    def broken(*args):
        raise RuntimeError("the sandbox did not start: no runner interpreter")
    gave_up = submit(app, course.alice, 1)
    for _ in range(2):
        grading.grade(app, gave_up, judge=broken)
    retried = submit(app, course.bob, 2)
    grading.grade(app, retried, judge=broken)
    assert grading.grade(app, retried, judge=judge_returning(report({}))).status == "graded"
    fine = graded(app, course.bob, 3, report({}))
    rows = analytics_of(app)["failing"]
    assert [r["submission"] for r in rows] == [gave_up, retried], "gave up first, then retried; never a clean one"
    first, second = rows
    assert first["status"] == "failed" and "no runner interpreter" in first["error"]
    assert first["attempts"] == 2 and first["outcomes"] == {"retry": 1, "failed": 1}
    assert second["status"] == "done" and second["outcomes"] == {"retry": 1, "graded": 1}
    assert "no runner interpreter" in second["last_problem"]
    assert fine not in [r["submission"] for r in rows]


def test_a_removed_student_is_left_out(klass, app):
    with get_db(app).Session() as s:
        s.execute(update(Student).where(Student.username == "dave").values(removed_at=datetime(2026, 12, 1)))
        s.commit()
    data = analytics_of(app)
    assert data["students"] == 3 and row(data["checks"], "check", "rope")["error"] == 0


def test_a_bad_basis_or_bucket_is_named(klass, app):
    for basis, bucket, says in (("some", None, "basis"), ("all", "week", "bucket")):
        with pytest.raises(store.StoreError, match=says):
            analytics_of(app, basis, bucket)


# ---------------------------------------------------------------- the API: JSON and CSV

def test_the_api_answers_json_with_links_to_examples(klass, app):
    course, ids = klass
    client, auth = app.test_client(), Course.auth(course.instructor)
    data = client.get(f"{URL}/analytics?basis=all", headers=auth).get_json()
    assert data["basis"] == "all" and set(analytics.PARTS) <= set(data)
    example = row(data["diagnoses"], "check", "split_heads")["examples"][0]
    assert example["links"]["page"] == f"/instructor/submissions/{example['submission']}"
    assert example["links"]["api"] == f"/api/v1/submissions/{example['submission']}"
    part = client.get(f"{URL}/analytics/checks", headers=auth).get_json()
    assert part["part"] == "checks" and row(part["checks"], "check", "split_heads")["pass_rate"] == 0.75


@pytest.mark.parametrize("path", ["analytics/diagnoses?format=csv&basis=all", "analytics/diagnoses.csv?basis=all"])
def test_each_part_comes_as_csv(klass, app, path):
    course, ids = klass
    r = app.test_client().get(f"{URL}/{path}", headers=Course.auth(course.instructor))
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert "cap-diagnoses.csv" in r.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    split = row(rows, "check", "split_heads")
    assert split["students"] == "2" and set(split["example_submissions"].split()) == {str(ids["alice1"]),
                                                                                       str(ids["bob"])}


@pytest.mark.parametrize("part, column", [("checks", "pass_rate"), ("items", "median"), ("timeline", "students"),
                                          ("slowest", "seconds"), ("failing", "last_problem")])
def test_every_part_has_a_csv_header(klass, app, part, column):
    r = app.test_client().get(f"{URL}/analytics/{part}.csv", headers=Course.auth(klass[0].instructor))
    assert r.status_code == 200 and column in r.get_data(as_text=True).splitlines()[0].split(",")


def test_the_api_refuses_students_unknown_parts_and_bad_options(klass, app):
    course, _ = klass
    client = app.test_client()
    assert client.get(f"{URL}/analytics", headers=Course.auth(course.alice)).status_code == 403
    assert client.get(f"{URL}/analytics").status_code == 401
    r = client.get(f"{URL}/analytics/grades", headers=Course.auth(course.instructor))
    assert r.status_code == 404 and "checks, diagnoses" in r.get_json()["message"]
    r = client.get(f"{URL}/analytics?basis=best", headers=Course.auth(course.instructor))
    assert r.status_code == 400 and "basis" in r.get_json()["message"]
    assert client.get("/api/v1/assignments/nope/analytics", headers=Course.auth(course.instructor)).status_code == 404


# ---------------------------------------------------------------- cost

def statements(app, fn) -> int:
    """How many SQL statements fn() runs."""
    engine, seen = get_db(app).engine, []
    listener = lambda *args: seen.append(1)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        fn()
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    return len(seen)


def test_the_number_of_queries_does_not_grow_with_the_class(app):
    course = make_course(app, checks=list(ALL))
    with app.app_context(), get_db(app).session() as s:
        tokens = [issue_token(s, "student", accounts.add_student(s, f"s{i}", f"S {i}"))[1] for i in range(12)]
        s.commit()
    for i, token in enumerate(tokens[:3]):
        graded(app, token, i, split_bug() if i % 2 else report({}))
    small = statements(app, lambda: analytics_of(app, "all"))
    for i, token in enumerate(tokens[3:], start=3):
        graded(app, token, i, split_bug() if i % 2 else scale_bug())
        graded(app, token, 100 + i, report({}))
    large = statements(app, lambda: analytics_of(app, "all"))
    assert analytics_of(app, "all")["graded"] == 21
    assert large == small, f"{small} statements for 3 submissions, {large} for 21: a query per submission somewhere"
