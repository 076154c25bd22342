"""The instructor's grading pages: regrade-all asks first, the manual-grading queue (rows that say how many items are
left, filters, graders, next/previous), the source with line numbers and comments, and the student's read-only view."""
import re

import pytest

from .web_helpers import PASSWORD, REFERENCE, csrf, graded_report, grade_now, sign_in_student, text_of, upload

ITEMS = 10  # manual items of the packaged rubric


@pytest.fixture
def classroom(web_app, students):
    """alice: 1 failing, then 2 passing (her best: it counts); bob: 3 graded (counts); carol: 4 queued."""
    from grader.app import accounts
    from grader.app.db import get_db
    upload(students["alice"], REFERENCE + b"# first\n", "first.py")
    grade_now(web_app, 1, graded_report(fail_split=True))
    upload(students["alice"], REFERENCE + b"# second\n", "second.py", report=(b"# Report\nIDs stated\n", "r.md"))
    grade_now(web_app, 2, graded_report(fail_split=False))
    upload(students["bob"], REFERENCE + b"# bob\n", "bob.py")
    grade_now(web_app, 3, graded_report(fail_split=True))
    with web_app.app_context(), get_db(web_app).session() as s:
        accounts.create_instructor(s, "ada", PASSWORD, "Ada L.")
    return students


def queue_ids(page) -> list[int]:
    return [int(n) for n in re.findall(r'aria-label="Grade submission (\d+)"', page.get_data(as_text=True))]


def manual_ids():
    from grader.app import scoring
    return [i.id for _, i in scoring.current_rubric().items() if i.kind == "manual"]


# ---------------------------------------------------------------- regrade all

def test_regrade_all_shows_the_number_and_asks_before_it_regrades(web_app, classroom, prof):
    from grader.app.db import get_db
    from grader.app.models import Submission
    dashboard = prof.get("/instructor/").get_data(as_text=True)
    assert 'href="/instructor/assignments/cap/regrade"' in dashboard, "Regrade all is a link to the question"
    asked = text_of(prof.get("/instructor/assignments/cap/regrade"))
    assert "This regrades the 2 counted submissions" in asked and "Regrade 2 counted submissions" in asked
    assert "Regrade every submission instead (3)" in asked
    with web_app.app_context(), get_db(web_app).session() as s:
        assert [s.get(Submission, i).request for i in (1, 2, 3)] == [1, 1, 1], "asking regrades nothing"
    r = prof.post("/instructor/assignments/cap/regrade", data={"csrf_token": csrf(prof, "/instructor/"),
                                                               "which": "counted", "confirm": "yes"})
    assert r.status_code == 303
    assert "Queued 2 counted submissions of cap for regrading" in text_of(prof.get(r.location))
    with web_app.app_context(), get_db(web_app).session() as s:
        assert [s.get(Submission, i).request for i in (1, 2, 3)] == [1, 2, 2], "alice's first does not count"


def test_a_post_without_confirmation_only_asks(web_app, classroom, prof):
    from grader.app.db import get_db
    from grader.app.models import Submission
    r = prof.post("/instructor/assignments/cap/regrade", data={"csrf_token": csrf(prof, "/instructor/"),
                                                               "which": "all"})
    assert r.status_code == 200 and "every submission of the assignment" in text_of(r)
    with web_app.app_context(), get_db(web_app).session() as s:
        assert s.get(Submission, 1).request == 1


# ---------------------------------------------------------------- the dashboard marks what counts

def test_the_dashboard_marks_the_counted_rows_and_says_how_many_items_are_left_there_only(classroom, prof):
    html = prof.get("/instructor/?assignment=cap").get_data(as_text=True)
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r'<tr>\s*<td><a href="/instructor/submissions/(\d+)"'
                                                             r'.*?</tr>', html, re.S)}
    assert set(rows) == {1, 2, 3}
    assert "tag counted" in rows[2] and "tag counted" in rows[3] and "tag counted" not in rows[1]
    assert f"{ITEMS} of {ITEMS} items to grade" in rows[2] and "to grade" not in rows[1], \
        "only the counted submission needs grading; no row says just '10 to grade'"


def test_a_students_history_marks_the_counted_submission(classroom, prof):
    html = prof.get("/instructor/students/alice").get_data(as_text=True)
    rows = re.findall(r"<tr>.*?</tr>", html, re.S)
    counted = [r for r in rows if "tag counted" in r]
    assert len(counted) == 1 and "second.py" in counted[0], counted


# ---------------------------------------------------------------- the queue

def test_the_queue_lists_what_counts_with_the_items_left(classroom, prof):
    page = prof.get("/instructor/assignments/cap/grading")
    assert page.status_code == 200
    assert queue_ids(page) == [2, 3], "alice's counted (2), not her first; bob's"
    assert text_of(page).count(f"{ITEMS} of {ITEMS} items to grade") == 2
    ids = manual_ids()
    prof.post("/instructor/assignments/cap/grading/2/manual", data={
        "csrf_token": csrf(prof, "/instructor/"), "then": "stay", **{f"points_{i}": "1" for i in ids[:-2]}})
    text = text_of(prof.get("/instructor/assignments/cap/grading"))
    assert f"2 of {ITEMS} items to grade" in text and f"{ITEMS} of {ITEMS} items to grade" in text
    prof.post("/instructor/assignments/cap/grading/2/manual", data={
        "csrf_token": csrf(prof, "/instructor/"), "then": "stay", **{f"points_{i}": "1" for i in ids[-2:]}})
    assert queue_ids(prof.get("/instructor/assignments/cap/grading")) == [3], "graded: out of 'needs grading'"
    assert queue_ids(prof.get("/instructor/assignments/cap/grading?show=graded")) == [2]
    assert queue_ids(prof.get("/instructor/assignments/cap/grading?show=all")) == [2, 3]
    assert queue_ids(prof.get("/instructor/assignments/cap/grading?show=all&student=bo")) == [3]


def test_next_and_previous_walk_the_queue_and_save_and_next_goes_on(classroom, prof):
    view = prof.get("/instructor/assignments/cap/grading/2")
    html = view.get_data(as_text=True)
    assert 'id="queue-next"' in html and 'href="/instructor/assignments/cap/grading/3"' in html
    assert "1 of 2" in text_of(view) and "No previous" in text_of(view)
    back = prof.get("/instructor/assignments/cap/grading/3")
    assert 'href="/instructor/assignments/cap/grading/2"' in back.get_data(as_text=True) and "2 of 2" in text_of(back)
    r = prof.post("/instructor/assignments/cap/grading/2/manual", data={
        "csrf_token": csrf(prof, "/instructor/"), "then": "next", "points_spec_contract": "6"})
    assert r.status_code == 303 and r.location.endswith("/instructor/assignments/cap/grading/3"), r.location
    assert "Saved 1 manual grade of submission 2" in text_of(prof.get(r.location))
    r = prof.post("/instructor/assignments/cap/grading/3/manual", data={
        "csrf_token": csrf(prof, "/instructor/"), "then": "next", "points_spec_contract": "5"})
    assert r.location.endswith("/instructor/assignments/cap/grading"), "the last one: back to the queue"
    assert "That was the last submission of the queue" in text_of(prof.get(r.location))


def test_a_refused_grade_keeps_what_was_typed_in_the_grading_view(web_app, classroom, prof):
    r = prof.post("/instructor/assignments/cap/grading/2/manual", data={
        "csrf_token": csrf(prof, "/instructor/"), "then": "next", "points_spec_contract": "9",
        "comment_spec_contract": "kept"})
    assert r.status_code == 422 and "points must be from 0 to 8" in text_of(r)
    assert 'value="9"' in r.get_data(as_text=True) and ">kept</textarea>" in r.get_data(as_text=True)


def test_a_submission_of_another_assignment_is_not_in_this_queue(web_app, classroom, prof):
    from grader.app import store
    from grader.app.db import get_db
    with web_app.app_context(), get_db(web_app).session() as s:
        store.create_assignment(s, "other")
        s.commit()
    assert prof.get("/instructor/assignments/other/grading/2").status_code == 404


def test_graders_are_assigned_round_robin_and_mine_filters(classroom, prof):
    token = csrf(prof, "/instructor/assignments/cap/grading")
    r = prof.post("/instructor/assignments/cap/grading/assign", data={
        "csrf_token": token, "action": "unassigned", "grader_to": ["prof", "ada"]})
    assert r.status_code == 303
    assert "Assigned 2 submissions: 1 to prof, 1 to ada" in text_of(prof.get(r.location))
    assert queue_ids(prof.get("/instructor/assignments/cap/grading?grader=mine")) == [2]
    assert queue_ids(prof.get("/instructor/assignments/cap/grading?grader=ada")) == [3]
    r = prof.post("/instructor/assignments/cap/grading/assign", data={
        "csrf_token": token, "action": "unassign", "submission": ["3"]})
    assert queue_ids(prof.get("/instructor/assignments/cap/grading?grader=unassigned")) == [3]
    r = prof.post("/instructor/assignments/cap/grading/assign", data={"csrf_token": token, "action": "selected",
                                                                      "grader_to": ["ada"]})
    assert "Select the submissions to assign" in text_of(prof.get(r.location))
    r = prof.post("/instructor/assignments/cap/grading/assign", data={"csrf_token": token, "action": "selected",
                                                                      "submission": ["3"]})
    assert "Choose the grader" in text_of(prof.get(r.location))


# ---------------------------------------------------------------- the source and comments on lines

def test_the_source_has_numbered_lines_to_link_to(classroom, prof):
    html = prof.get("/instructor/submissions/2").get_data(as_text=True)
    lines = REFERENCE.decode().splitlines()
    assert f'id="L{len(lines) + 1}"' in html and f'id="L{len(lines) + 2}"' not in html, "one anchor per line"
    assert '<a class="ln" href="#L12" aria-label="Line 12">12</a>' in html


def test_a_comment_on_a_line_is_shown_under_it_and_the_student_reads_it(web_app, classroom, prof):
    here = "/instructor/assignments/cap/grading/2"
    r = prof.post("/instructor/submissions/2/comments", data={
        "csrf_token": csrf(prof, here), "line": "12", "text": "why a transpose here?", "next": here})
    assert r.status_code == 303 and r.location.endswith(here + "#L12"), r.location
    html = prof.get(here).get_data(as_text=True)
    after = html.split('id="L12"', 1)[1]
    assert after.index("why a transpose here?") < after.index('id="L13"'), "the comment sits under line 12"
    alice, bob = classroom["alice"], classroom["bob"]
    assert "your source with 1 comment from your graders" in text_of(alice.get("/submissions/2"))
    mine = alice.get("/submissions/2/source")
    assert mine.status_code == 200 and "why a transpose here?" in text_of(mine)
    assert 'name="text"' not in mine.get_data(as_text=True) and "Delete" not in text_of(mine), "read-only"
    assert bob.get("/submissions/2/source").status_code == 404, "only their own"
    assert prof.get("/submissions/2/source").status_code == 302, "a student page: instructors are sent to sign in"


@pytest.mark.parametrize("line, text, says", [("0", "x", "line must be a line number from 1 to"),
                                              ("", "x", "line must be a line number"),
                                              ("3", " ", "the comment on line 3 is empty")])
def test_a_bad_comment_is_refused_with_the_reason(classroom, prof, line, text, says):
    r = prof.post("/instructor/submissions/2/comments", data={"csrf_token": csrf(prof, "/instructor/"),
                                                              "line": line, "text": text})
    assert r.status_code == 303 and r.location.endswith("#comment-form")
    assert says in text_of(prof.get(r.location))


def test_a_comment_can_be_deleted(web_app, classroom, prof):
    from grader.app.db import get_db
    from grader.app.models import LineComment
    token = csrf(prof, "/instructor/")
    prof.post("/instructor/submissions/2/comments", data={"csrf_token": token, "line": "3", "text": "typo"})
    with web_app.app_context(), get_db(web_app).session() as s:
        cid = s.query(LineComment).one().id
    r = prof.post(f"/instructor/submissions/2/comments/{cid}/delete", data={"csrf_token": token})
    assert r.status_code == 303 and "The comment on line 3 was deleted" in text_of(prof.get(r.location))
    assert "typo" not in text_of(classroom["alice"].get("/submissions/2/source"))
    assert prof.post(f"/instructor/submissions/3/comments/{cid}/delete", data={"csrf_token": token}).status_code == 404


@pytest.mark.parametrize("path", ["/instructor/assignments/cap/grading/assign", "/instructor/submissions/2/comments",
                                  "/instructor/assignments/cap/grading/2/manual"])
def test_the_grading_forms_need_the_sessions_csrf_token(classroom, prof, path):
    assert prof.post(path, data={"line": "1", "text": "x"}).status_code == 400


def test_students_cannot_open_the_grading_pages(classroom):
    r = classroom["alice"].get("/instructor/assignments/cap/grading")
    assert r.status_code == 302 and "/instructor/signin" in r.location


def test_a_message_citing_a_line_links_to_it(web_app, course, prof):
    student = web_app.test_client()
    sign_in_student(student, "alice", course.alice)
    upload(student, REFERENCE + b"# cites\n", "cites.py")
    report = graded_report(fail_split=True)
    split = next(c for c in report["checks"] if c["id"] == "split_heads")
    split.update(status="error", message="your code raised ValueError: line 25, in split_heads: raise ValueError(...)",
                 details=["line 25, in split_heads: raise ValueError(...)"])
    grade_now(web_app, 1, report)
    mine = student.get("/submissions/1").get_data(as_text=True)
    assert '<a href="/submissions/1/source#L25">line 25</a>' in mine, "the student's link goes to their own source"
    theirs = prof.get("/instructor/submissions/1").get_data(as_text=True)
    assert '<a href="#L25">line 25</a>' in theirs and 'id="L25"' in theirs, "the instructor's source is on the page"


THREE_ITEMS = """version = "three.1"
total = 10

[[categories]]
id = "auto"
weight = 4

[[categories.items]]
id = "split"
check = "split_heads"
points = 4

[[categories]]
id = "report"
weight = 6

[[categories.items]]
id = "written"
title = "Masks stated"
points = 2
description = "what the report says about it"

[[categories.items]]
id = "ablation"
title = "One ablation"
points = 2
description = "what the report says about it"

[[categories.items]]
id = "limits"
title = "Limits stated"
points = 2
description = "what the report says about it"
"""


def test_the_queue_and_the_form_follow_the_assignments_pinned_rubric(web_app, course, prof):
    """Three manual items of the pinned rubric, not the packaged rubric's ten: "2 of 3 items to grade"."""
    api = web_app.test_client()
    r = api.patch("/api/v1/assignments/cap", headers={"Authorization": f"Bearer {course.instructor}"},
                  json={"rubric": THREE_ITEMS, "rubric_filename": "three.toml"})
    assert r.status_code == 200, r.get_json()
    student = web_app.test_client()
    sign_in_student(student, "alice", course.alice)
    upload(student, REFERENCE + b"# pinned\n", "pinned.py")
    grade_now(web_app, 1, graded_report(fail_split=False))
    assert "3 of 3 items to grade" in text_of(prof.get("/instructor/assignments/cap/grading"))
    view = text_of(prof.get("/instructor/assignments/cap/grading/1"))
    assert "Masks stated" in view and "One ablation" in view and "IDs, shapes and masks stated" not in view
    r = prof.post("/instructor/assignments/cap/grading/1/manual", data={
        "csrf_token": csrf(prof, "/instructor/"), "then": "stay", "points_written": "2"})
    assert r.status_code == 303 and "Saved 1 manual grade" in text_of(prof.get(r.location))
    assert "2 of 3 items to grade" in text_of(prof.get("/instructor/assignments/cap/grading"))
    dashboard = text_of(prof.get("/instructor/"))
    assert "2 of 3 items to grade" in dashboard
    page = text_of(prof.get("/instructor/submissions/1"))
    assert "Masks stated" in page and "IDs, shapes and masks stated" not in page, "the submission page's form too"


def test_the_submission_page_says_whether_it_counts_and_links_to_the_grading_view(classroom, prof):
    counted = prof.get("/instructor/submissions/2")
    assert f"The submission that counts for this student. {ITEMS} of {ITEMS} items to grade by hand" in text_of(counted)
    assert 'href="/instructor/assignments/cap/grading/2?show=all"' in counted.get_data(as_text=True)
    earlier = text_of(prof.get("/instructor/submissions/1"))
    assert "Not the submission that counts for this student ( 2 does)" in earlier, earlier


def test_a_grader_takes_a_submission_from_the_grading_view(classroom, prof):
    here = "/instructor/assignments/cap/grading/3"
    html = prof.get(here).get_data(as_text=True)
    assert 'id="assign-me"' in html and "grader unassigned" in text_of(prof.get(here))
    r = prof.post("/instructor/assignments/cap/grading/assign", data={
        "csrf_token": csrf(prof, here), "action": "selected", "submission": "3", "grader_to": "prof", "next": here})
    assert r.status_code == 303 and r.location.endswith(here)
    page = prof.get(here)
    assert "Assigned 1 submission: 1 to prof" in text_of(page) and 'id="assign-me"' not in page.get_data(as_text=True)
