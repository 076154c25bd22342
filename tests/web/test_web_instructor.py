"""The instructor's pages: dashboard filters and sorting, manual grading, regrades, distribution, CSV, roster import."""
import csv
import io

import pytest
from sqlalchemy import select

from .web_helpers import REFERENCE, csrf, graded_report, grade_now, sign_in_student, text_of, upload


@pytest.fixture
def classroom(web_app, students):
    """alice: two graded submissions (split_heads failing, then passing, with a report); bob: one queued."""
    upload(students["alice"], REFERENCE + b"# first\n", "first.py")
    grade_now(web_app, 1, graded_report(fail_split=True))
    upload(students["alice"], REFERENCE + b"# second\n", "second.py", report=(b"# Report\nshapes: (B, T, D)\n", "r.md"))
    grade_now(web_app, 2, graded_report(fail_split=False))
    upload(students["bob"], REFERENCE + b"# bob\n", "bob.py")
    return students


def ids_on(page) -> list[int]:
    import re
    return [int(n) for n in re.findall(r'href="/instructor/submissions/(\d+)"', page.get_data(as_text=True))]


@pytest.mark.parametrize("query, expected", [
    ("", [3, 2, 1]),
    ("?student=ali", [2, 1]),
    ("?student=Bob", [3]),
    ("?status=queued", [3]),
    ("?status=done&sort=score&order=desc", [2, 1]),
    ("?sort=score&order=asc", [1, 2, 3]),
    ("?min=12", [2]),
    ("?sort=student&order=asc", [1, 2, 3]),
    ("?assignment=cap&max=12", [1]),
])
def test_the_dashboard_filters_and_sorts(classroom, prof, query, expected):
    page = prof.get("/instructor/" + query)
    assert page.status_code == 200
    assert ids_on(page) == expected, f"{query or 'no filter'}: rows {ids_on(page)}, expected {expected}"


def test_a_bad_filter_is_named_not_a_crash(classroom, prof):
    text = text_of(prof.get("/instructor/?min=abc&status=weird"))
    assert "the minimum score must be a number" in text and "unknown status 'weird'" in text


def test_a_students_history(classroom, prof):
    page = prof.get("/instructor/students/alice")
    assert ids_on(page) == [2, 1] and "second.py" in text_of(page)
    assert prof.get("/instructor/students/nobody").status_code == 404


def test_the_detail_shows_the_report_beside_the_scores_and_everything_hidden(classroom, prof):
    text = text_of(prof.get("/instructor/submissions/2"))
    assert "shapes: (B, T, D)" in text, "the Markdown report is shown on the grading page"
    assert "IDs, shapes and masks stated" in text and "hidden" in text, "instructors see hidden items, marked"
    assert "seed 20261129" in text
    assert "Save manual grades" in text


def test_manual_grades_are_saved_rescored_and_remembered(web_app, classroom, prof):
    from grader.app.db import get_db
    from grader.app.models import Submission
    from grader.app.models import ManualGrade
    token = csrf(prof, "/instructor/submissions/2")
    r = prof.post("/instructor/submissions/2/manual", data={
        "csrf_token": token, "points_spec_contract": "6.5", "comment_spec_contract": "IDs stated; masks implicit",
        "points_ablation_table": ""})
    assert r.status_code == 303
    text = text_of(prof.get(r.location))
    assert "Saved 1 manual grade" in text
    with web_app.app_context(), get_db(web_app).session() as s:
        sub = s.get(Submission, 2)
        assert sub.manual == {"spec_contract": {"points": 6.5, "comment": "IDs stated; masks implicit"}}
        history = s.scalars(select(ManualGrade)).all()
        assert [(h.item_id, h.points, h.instructor_id is not None) for h in history] == [("spec_contract", 6.5, True)]
    assert "IDs stated; masks implicit" in text


@pytest.mark.parametrize("points, message", [("9", "points must be from 0 to 8"), ("-1", "points must be from 0"),
                                             ("lots", "'lots' is not a number")])
def test_out_of_range_manual_points_are_refused(web_app, classroom, prof, points, message):
    from grader.app.db import get_db
    from grader.app.models import Submission
    r = prof.post("/instructor/submissions/2/manual", data={"csrf_token": csrf(prof, "/instructor/"),
                                                            "points_spec_contract": points,
                                                            "comment_spec_contract": "kept when refused"})
    assert r.status_code == 422 and message in text_of(r), "the page again, saying why"
    html = r.get_data(as_text=True)
    assert f'value="{points}"' in html and "kept when refused</textarea>" in html, "what was typed is kept"
    with web_app.app_context(), get_db(web_app).session() as s:
        assert s.get(Submission, 2).manual is None


def test_regrade_one_and_all(web_app, classroom, prof):
    from grader.app.db import get_db
    from grader.app.models import Submission
    token = csrf(prof, "/instructor/")
    assert prof.post("/instructor/submissions/1/regrade", data={"csrf_token": token}).status_code == 303
    r = prof.post("/instructor/submissions/3/regrade", data={"csrf_token": token})
    assert r.status_code == 409 and "regrade it once it is done" in text_of(r)
    asked = prof.get("/instructor/assignments/cap/regrade")
    assert "This regrades the 1 counted submission" in text_of(asked), "the count first (bob's counts nothing yet)"
    every = text_of(prof.get("/instructor/assignments/cap/regrade?which=all"))
    assert "every submission of the assignment: 1 . 2 are skipped: already queued or running" in every, every
    with web_app.app_context(), get_db(web_app).session() as s:
        assert s.get(Submission, 2).request == 1, "asking regrades nothing"
    prof.post("/instructor/assignments/cap/regrade", data={"csrf_token": token, "which": "counted", "confirm": "yes"})
    with web_app.app_context(), get_db(web_app).session() as s:
        requests = {sid: (s.get(Submission, sid).status, s.get(Submission, sid).request) for sid in (1, 2, 3)}
    assert requests == {1: ("queued", 2), 2: ("queued", 2), 3: ("queued", 1)}, requests


def test_the_distribution_has_a_histogram_per_category(classroom, prof):
    page = prof.get("/instructor/assignments/cap")
    html = page.get_data(as_text=True)
    assert html.count('<svg class="chart chart-histogram"') == 1 + 7, "the total and each of the 7 categories"
    assert "Specification (of 15)" in html and "for each of 1 student " in text_of(page)


def test_the_csv_export_is_the_gradebook(web_app, classroom, prof):
    prof.post("/instructor/submissions/2/manual", data={"csrf_token": csrf(prof, "/instructor/"),
                                                        "points_spec_contract": "6"})
    r = prof.get("/instructor/assignments/cap/export.csv")
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert 'filename="cap.csv"' in r.headers["Content-Disposition"]
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(r.get_data(as_text=True)))}
    assert set(rows) == {"alice", "bob"}
    assert float(rows["alice"]["specification"]) == 6.0 and rows["bob"]["total"] == ""


def test_a_roster_import_issues_tokens_that_sign_in(web_app, prof):
    token = csrf(prof, "/instructor/roster")
    roster = b"username,name,email\ncarol,Carol C,carol@example.org\ndave,Dave D,\n"
    r = prof.post("/instructor/roster", data={"csrf_token": token, "roster": (io.BytesIO(roster), "roster.csv")},
                  content_type="multipart/form-data")
    assert r.status_code == 200
    import re
    tokens = re.findall(r'<code class="token">([^<]+)</code>', r.get_data(as_text=True))
    assert len(tokens) == 2 and "shown only this once" in text_of(r)
    student = web_app.test_client()
    assert sign_in_student(student, "carol", tokens[0]).status_code == 303, "the issued token signs carol in"
    again = prof.post("/instructor/roster", data={"csrf_token": token, "text": "username\ncarol\n", "reissue": "1",
                                                  "as": "csv"})
    assert again.mimetype == "text/csv"
    new = list(csv.DictReader(io.StringIO(again.get_data(as_text=True))))
    assert [r["username"] for r in new] == ["carol"] and new[0]["token"] != tokens[0]
    assert student.get("/submit").status_code == 302, "reissuing revokes the old token, and its session"


@pytest.mark.parametrize("text, message", [("name\nx\n", "needs a header row with a 'username' column"),
                                           ("username\nx\nx\n", "Line 3: username x is already on line 2"),
                                           ("", "Choose a CSV file")])
def test_a_bad_roster_is_refused_with_the_reason(web_app, prof, text, message):
    r = prof.post("/instructor/roster", data={"csrf_token": csrf(prof, "/instructor/roster"), "text": text})
    assert r.status_code == 422 and message in text_of(r)
