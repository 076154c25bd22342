"""The class analytics page (instructor): what it says about the class, its basis switch, its charts, its CSV
downloads, the link to it, and that only instructors see it."""
import csv
import io
import re

import pytest

from tests.feedback.reports import SPLIT, report, split_root_cause

from .web_helpers import REFERENCE, grade_now, text_of, upload

PAGE = "/instructor/assignments/cap/analytics"
SPLIT_OTHER = SPLIT.replace("3.91", "2.5").replace("216 of 240", "200 of 240").replace("[0, 2, 3]", "[1, 1, 1]")


def split_bug(message: str) -> dict:
    return report({}, split_heads={"status": "fail", "message": message, "details": [message]})


@pytest.fixture
def classroom(web_app, students):
    """alice: the split bug with its root causes, then everything passing; bob: the same split bug, other numbers."""
    upload(students["alice"], REFERENCE + b"# first\n", "first.py")
    grade_now(web_app, 1, split_root_cause())
    upload(students["alice"], REFERENCE + b"# second\n", "second.py")
    grade_now(web_app, 2, report({}))
    upload(students["bob"], REFERENCE + b"# bob\n", "bob.py")
    grade_now(web_app, 3, split_bug(SPLIT_OTHER))
    return students


def rows_of(page, table_class: str) -> list[str]:
    """The text of each body row of the table with this class."""
    html = page.get_data(as_text=True)
    body = re.search(rf'<table class="list {table_class}">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body, f"no table {table_class}"
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r)).strip() for r in re.findall(r"<tr.*?</tr>", body[1], re.S)]


def test_the_page_shows_pass_rates_over_the_counted_submissions(classroom, prof):
    page = prof.get(PAGE)
    assert page.status_code == 200
    text = text_of(page)
    assert "over the submission that counts for each student" in text and "each student's best submission" in text
    split = next(r for r in rows_of(page, "analytics-checks") if "split_heads" in r)
    assert "50% 1 1 0 0 0 2" in split, f"alice's best passes, bob's fails: {split}"


def test_all_submissions_is_a_choice_and_says_so(classroom, prof):
    page = prof.get(PAGE + "?basis=all")
    assert "over every graded submission" in text_of(page)
    assert "3 reports;" in page.get_data(as_text=True), "the histograms count reports, not students, here"
    split = next(r for r in rows_of(page, "analytics-checks") if "split_heads" in r)
    assert "33% 1 2" in split, split


def test_one_bug_in_two_students_is_one_diagnosis_with_links(classroom, prof):
    page = prof.get(PAGE + "?basis=all")
    groups = rows_of(page, "analytics-diagnoses")
    split = [g for g in groups if g.startswith("Head split") or " split_heads fail " in g and "Root cause" not in g]
    assert len(split) == 1, groups
    assert "#1 alice" in split[0] and "#3 bob" in split[0] and " 2 2 " in split[0], split[0]
    html = page.get_data(as_text=True)
    assert '<a href="/instructor/submissions/3" title="split_heads(x, 4)[1, 1, 1]' in html, "an example, its message"
    caused = [g for g in groups if "Root cause: split_heads" in g]
    assert len(caused) == 3, f"causality, padding and kv_cache each under split_heads: {groups}"


def test_points_per_item_and_the_charts(classroom, prof):
    page = prof.get(PAGE)
    html = page.get_data(as_text=True)
    items = rows_of(page, "analytics-items")
    assert items[0].startswith("Total") and any(r.startswith("Head split") for r in items), items[:4]
    assert html.count('data-chart="stacked"') == 1, "the pass-rate chart"
    assert html.count('data-chart="time"') == 1, "the uploads-over-time chart"
    assert html.count('data-chart="histogram"') > 3, "total, categories and items"
    assert "style=" not in html, "the CSP allows no inline styles"


def test_gradings_are_listed_with_links(classroom, prof):
    page = prof.get(PAGE)
    slow = rows_of(page, "analytics-slowest")
    assert len(slow) == 3 and all(re.match(r"\d+ (alice|bob) ", r) for r in slow), slow
    assert rows_of(page, "analytics-failing") == ["No grading failed or needed a retry."]


@pytest.mark.parametrize("part, first", [("checks", "check"), ("diagnoses", "check"), ("items", "kind"),
                                         ("timeline", "start"), ("slowest", "submission"), ("failing", "submission")])
def test_each_section_downloads_as_csv(classroom, prof, part, first):
    page = prof.get(PAGE)
    link = f"/instructor/assignments/cap/analytics/{part}.csv?basis=counted"
    assert f'href="{link}"' in page.get_data(as_text=True), f"the {part} section links its CSV"
    r = prof.get(link)
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert next(csv.reader(io.StringIO(r.get_data(as_text=True))))[0] == first


def test_the_assignment_page_links_here(classroom, prof):
    html = prof.get("/instructor/assignments/cap").get_data(as_text=True)
    assert f'href="{PAGE}"' in html


def test_a_bad_choice_is_named(classroom, prof):
    page = prof.get(PAGE + "?basis=best")
    assert page.status_code == 400 and "basis is counted or all" in text_of(page)


def test_students_and_strangers_never_see_it(classroom, web_app):
    """A signed-in student and a stranger are sent to the instructors' sign-in, for the page and its CSV alike."""
    alice, stranger = classroom["alice"], web_app.test_client()
    for client in (alice, stranger):
        for path in (PAGE, PAGE + "/checks.csv"):
            r = client.get(path)
            assert r.status_code == 302 and "/instructor/signin" in r.headers["Location"], (path, r.status_code)
    landed = text_of(alice.get(PAGE, follow_redirects=True))
    assert "That page is for instructors" in landed and "split_heads" not in landed, landed[:500]



def test_an_assignment_nobody_submitted_to_says_so(course, prof):
    page = prof.get(PAGE)
    assert page.status_code == 200
    assert rows_of(page, "analytics-diagnoses") == ["No failing check in these reports."]
    assert rows_of(page, "analytics-slowest") == ["Nothing graded yet."]
    assert "0 graded reports of 0 students" in text_of(page)
    assert "Uploads per day (UTC): no data" in text_of(page)
