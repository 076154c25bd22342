"""The instructor's feedback page (what students see of each rubric item) and the student pages under its levels: a
hidden check leaks into no student page (result, What to fix, history, live list), the form sets levels now and at
the due date, and refuses a half-given switch naming the item. The browser test drives the form in Chromium, checks
it with axe-core and keeps a screenshot in docs/screenshots/."""
import re

import pytest

from tests.service.svc_cluster import LiveServer
from tests.service.svc_helpers import Course, make_app, make_course

from .browser_support import assert_accessible, assert_fits, launched
from .web_helpers import (PASSWORD, REFERENCE, ROOT, csrf, grade_now, graded_report, sign_in_instructor,
                          sign_in_student, text_of, upload)

SECRET = "SPLIT-SECRET-5521 heads interleaved instead of contiguous"
TITLE = "Head split and merge"  # the split_heads item's title in the capstone rubric
SCREENSHOTS = ROOT / "docs" / "screenshots"


def secret_report() -> dict:
    """graded_report with split_heads failing in distinctive words (its message, details and output)."""
    report = graded_report(fail_split=True)
    split = next(c for c in report["checks"] if c["id"] == "split_heads")
    split["message"] = SECRET + "; " + split["message"]
    split["stdout"] = "SPLIT-PRINTED-8812\n"
    return report


def prof_client(web_app):
    prof = web_app.test_client()
    sign_in_instructor(prof)
    return prof


def save_levels(prof, fields: dict):
    """Post the feedback form with `fields` (level_<key>, later_<key>, at_<key>, due_<key>) and no other change."""
    return prof.post("/instructor/assignments/cap/feedback",
                     data={"csrf_token": csrf(prof, "/instructor/assignments/cap/feedback"), **fields})


def test_the_page_lists_every_item_with_its_default_and_is_linked_from_the_assignment(web_app, course):
    prof = prof_client(web_app)
    assert 'href="/instructor/assignments/cap/feedback"' in prof.get("/instructor/assignments/cap").get_data(True)
    page = prof.get("/instructor/assignments/cap/feedback")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="rule-split_heads"' in html and 'id="rule-specification"' in html and 'id="rule-honesty_limits"' in html
    text = text_of(page)
    assert "Head split and merge split_heads 3 pts full" in text, "an automatic item: its check, points, default"
    assert web_app.test_client().get("/instructor/assignments/cap/feedback").status_code in (302, 303), \
        "signed out: sent to sign in"


def test_a_hidden_check_leaks_into_no_student_page(web_app, client, course):
    sign_in_student(client, "alice", course.alice)
    upload(client)
    grade_now(web_app, 1, secret_report())
    page = text_of(client.get("/submissions/1"))
    assert SECRET in page and TITLE in page, "by default the student sees the failing check and its item in full"
    prof = prof_client(web_app)
    assert save_levels(prof, {"level_split_heads": "hidden"}).status_code == 303
    for path in ("/submissions/1", "/submissions", "/submit", "/submissions/1/status.json"):
        html = client.get(path).get_data(as_text=True)
        for text in (SECRET, "SPLIT-PRINTED-8812", TITLE, "216 of 240"):
            assert text not in html, f"{path} shows {text!r} of a hidden item"
    page = text_of(client.get("/submissions/1"))
    assert "All 2 checks passed." in page, "What to fix and the counts leave the hidden check out"
    assert "11 more items (53 points) are not shown yet and not in this total" in page, \
        "the ten hidden manual items (50 points) and split_heads (3) are counted, never named"
    instructor_page = prof.get("/instructor/submissions/1")
    assert SECRET in instructor_page.get_data(as_text=True), "the instructor sees everything"
    assert "Head split and merge students see: hidden" in text_of(instructor_page), "tagged with what students see"


def test_a_root_cause_that_names_a_hidden_check_is_not_shown(web_app, client, course):
    """A visible check explained by a hidden one: naming the function would tell the student the hidden check failed."""
    report = secret_report()
    sdpa = next(c for c in report["checks"] if c["id"] == "attention_sdpa")
    sdpa.update(status="fail", message="compared with scaled_dot_product_attention: 96 of 96 values differ",
                root_cause={"check": "split_heads",
                            "evidence": "with a correct split_heads in place of yours, attention_sdpa passes"})
    sign_in_student(client, "alice", course.alice)
    upload(client)
    grade_now(web_app, 1, report)
    cause = ("Fix split_heads first", "with a correct split_heads")
    page = client.get("/submissions/1").get_data(as_text=True)
    assert all(text in page for text in cause), "the control: a visible split_heads is named as the root cause"
    assert save_levels(prof_client(web_app), {"level_split_heads": "hidden"}).status_code == 303
    page = client.get("/submissions/1").get_data(as_text=True)
    answer = web_app.test_client().get("/api/v1/submissions/1/result", headers=Course.auth(course.alice))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    answer = answer.get_data(as_text=True)
    for where, html in (("the result page", page), ("the API", answer)):
        assert "96 of 96 values differ" in html, f"{where}: the visible check keeps its own message"
        for text in cause + ("root_cause",):
            assert text not in html, f"{where} shows {text!r}, which names a hidden check"


def test_points_and_summary_show_what_they_say_on_the_result_page(web_app, client, course):
    sign_in_student(client, "alice", course.alice)
    upload(client)
    grade_now(web_app, 1, secret_report())
    prof = prof_client(web_app)
    save_levels(prof, {"level_split_heads": "points"})
    html = client.get("/submissions/1").get_data(as_text=True)
    assert TITLE in html and SECRET not in html and 'id="check-split_heads"' not in html, "points: the points only"
    save_levels(prof, {"level_split_heads": "summary"})
    html = client.get("/submissions/1").get_data(as_text=True)
    assert SECRET in html and "SPLIT-PRINTED-8812" not in html and "merge_heads(split_heads(x)) is not x" not in html, \
        "summary: the one-line message, not the details or output"


def test_the_form_switches_at_the_due_date_and_refuses_a_half_given_switch(web_app, course):
    prof = prof_client(web_app)
    r = save_levels(prof, {"level_rope": "points", "later_rope": "full"})
    assert r.status_code == 422
    assert "Rotary position embedding: a later level needs switch_at" in text_of(r), "the refusal names the item"
    r = save_levels(prof, {"level_rope": "points", "later_rope": "full", "due_rope": "1"})
    assert r.status_code == 303
    text = text_of(prof.get("/instructor/assignments/cap/feedback"))
    assert "points full from 2026-12-18 23:59 UTC (the due date: it moves with it)" in text, \
        "at the due date: the rubric policy's deadline, followed if it changes"
    html = prof.get("/instructor/assignments/cap/feedback").get_data(as_text=True)
    assert re.search(r'name="due_rope" value="1" checked', html), "the form shows the rule as set: at the due date"
    r = save_levels(prof, {"level_rope": "points", "later_rope": "full", "at_rope": "2027-01-05T09:30"})
    assert "full from 2027-01-05 09:30 UTC" in text_of(prof.get("/instructor/assignments/cap/feedback"))
    save_levels(prof, {})  # every select back to its default: the rule is gone
    page = prof.get("/instructor/assignments/cap/feedback").get_data(as_text=True)
    assert "full from" not in page


@pytest.mark.browser
def test_the_feedback_page_in_chromium(tmp_path):
    """An instructor hides an item through the form in Chromium; the student's page then lacks it; axe-core and the
    phone width pass on both pages; a screenshot of the form goes to docs/screenshots/."""
    from grader.app import accounts
    from grader.app.db import get_db
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
        app = make_app(f"sqlite:///{tmp_path}/grader.sqlite", tmp_path, ENFORCE_ATTEMPTS=False, WEB_POLL_S=60)
        course = make_course(app)
        with app.app_context(), get_db(app).session() as s:
            accounts.create_instructor(s, "prof", PASSWORD, "Prof. Ada")
        client = app.test_client()
        sign_in_student(client, "alice", course.alice)
        upload(client, REFERENCE)
        grade_now(app, 1, secret_report())
        server = LiveServer(app).start()
        try:
            with launched() as browser:
                page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
                page.goto(server.url + "/instructor/signin")
                page.fill("input[name=username]", "prof")
                page.fill("input[name=password]", PASSWORD)
                page.click("button.primary")
                page.wait_for_load_state()
                page.goto(server.url + "/instructor/assignments/cap")
                page.click("text=What students see")
                page.wait_for_url("**/feedback")
                page.select_option("select[name=level_split_heads]", "hidden")
                page.select_option("select[name=level_rope]", "points")
                page.select_option("select[name=later_rope]", "full")
                page.check("input[name=due_rope]")
                page.click("button:has-text('Save levels')")
                page.wait_for_url("**/feedback")
                assert "Saved: 2 rules changed for cap." in page.inner_text("body")
                assert page.inner_text("#rule-rope") .count("full from 2026-12-18 23:59 UTC") == 1
                assert_accessible(page, "instructor feedback page")
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / "web_feedback_levels.png"), full_page=True)
                student = browser.new_context(viewport={"width": 390, "height": 800}).new_page()
                student.goto(server.url + "/signin")
                student.fill("input[name=username]", "alice")
                student.fill("input[name=token]", course.alice)
                student.click("button.primary")
                student.wait_for_url("**/submit")
                student.goto(server.url + "/submissions/1")
                body = student.inner_text("body")
                assert SECRET not in body and TITLE not in body, "hidden on the student's page"
                assert "Rotary position embedding" in body, "points: the item's points are shown"
                assert_accessible(student, "student result with hidden items")
                assert_fits(student, "student result with hidden items, phone")
                student.screenshot(path=str(SCREENSHOTS / "web_feedback_student_phone.png"), full_page=True)
        finally:
            server.stop()
            get_db(app).engine.dispose()


def test_the_history_totals_leave_a_hidden_items_points_out(web_app, client, course):
    import re
    sign_in_student(client, "alice", course.alice)
    upload(client)
    grade_now(web_app, 1, graded_report(fail_split=False))  # split_heads passes: its 3 points are in the total

    def total(path):
        found = re.search(r"(\d+(?:\.\d+)?) / (\d+(?:\.\d+)?)", text_of(client.get(path)).split("My submissions")[-1])
        return float(found[1]), float(found[2])
    before = total("/submissions")
    save_levels(prof_client(web_app), {"level_split_heads": "hidden"})
    assert total("/submissions") == (before[0] - 3, before[1] - 3), "a hidden item's points and maximum are left out"
    assert total("/submit") == (before[0] - 3, before[1] - 3), "the submit page's history too"
