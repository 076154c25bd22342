"""Grading what counts in headless Chromium, at 1280 px and on a 390 px phone: the regrade-all question, the manual-
grading queue, the grading view (source with line numbers and comments, the report, the manual items, next and
previous) and the student's own source with the comments. On each page axe-core finds no serious or critical
violation and nothing is wider than the window. Screenshots: docs/screenshots/grading-*.png.

The app runs on SQLite over real HTTP, graded in this process with stand-in reports, so this takes seconds.
"""
import io

import pytest

from tests.service.svc_helpers import make_course

from .browser_support import SCREENSHOTS, WIDTHS, check_page, new_page, served, signed_in_state, sqlite_app
from .web_helpers import PASSWORD, REFERENCE, graded_report, grade_now

pytestmark = [pytest.mark.browser]
CLASS = ["alice", "bob", "carol", "dmitri"]
COMMENT = "This reshape mixes heads and positions: compare with the (B, H, T, Dh) order in the contract."


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Four students, each with one graded upload (alice two: her better one counts), a report from alice, a comment
    on line 12 of alice's counted file; instructors prof and ada."""
    from grader.app import accounts, grading
    from grader.app.accounts import issue_token
    from grader.app.db import get_db
    from grader.app.models import Submission
    with sqlite_app(tmp_path_factory.mktemp("grading"), ENFORCE_ATTEMPTS=False) as app:
        make_course(app)
        with app.app_context(), get_db(app).session() as s:
            accounts.create_instructor(s, "prof", PASSWORD, "Prof. Ada")
            accounts.create_instructor(s, "ada", PASSWORD, "Ada Lovelace")
            tokens = {}
            for name in CLASS:
                try:
                    student = accounts.get_student(s, name)
                except Exception:
                    student = accounts.add_student(s, name, name.title())
                tokens[name] = issue_token(s, "student", student)[1]
            s.commit()
        client, n = app.test_client(), 0
        for name, fail in [("alice", True), ("alice", False), ("bob", True), ("carol", False), ("dmitri", True)]:
            n += 1
            r = client.post("/api/v1/assignments/cap/submissions", content_type="multipart/form-data",
                            headers={"Authorization": f"Bearer {tokens[name]}"},
                            data={"file": (io.BytesIO(REFERENCE + f"# {n}\n".encode()), f"{name}-v{n}.py")})
            assert r.status_code == 202, r.get_json()
            grade_now(app, n, graded_report(fail_split=fail))
        with app.app_context(), get_db(app).session() as s:
            from grader.app import coursework
            sub = s.get(Submission, 2)
            coursework.attach_report(s, sub, b"# Report\n\nPAD = 0, BOS = 1; shapes (B, T, D) -> (B, H, T, Dh).\n",
                                     "report.md", "markdown")
            grading.add_comment(s, sub, 12, COMMENT, accounts.authenticate_instructor(s, "prof", PASSWORD))
            s.commit()
        with served(app) as (browser, url):
            yield Site(browser, url, tokens)


class Site:
    def __init__(self, browser, url, tokens):
        self.browser, self.url, self.tokens, self.states = browser, url, tokens, {}

    def page(self, width: int, who: str = "prof"):
        """A page signed in as the instructor prof (or a student), in a window `width` px wide."""
        if who not in self.states:
            self.states[who] = signed_in_state(self.browser, self.url, who, None if who == "prof" else self.tokens[who])
        return new_page(self.browser, width, storage_state=self.states[who])


def check_and_photograph(page, what: str, name: str) -> None:
    check_page(page, what, SCREENSHOTS / f"grading-{name}.png")


@pytest.mark.parametrize("name, width", list(WIDTHS.items()))
def test_the_queue_fits_axe_finds_nothing_serious_and_it_is_photographed(site, name, width):
    page = site.page(width)
    page.goto(site.url + "/instructor/assignments/cap/grading")
    rows = page.locator("table.queue tbody tr")
    assert rows.count() == 4, "one counted submission per student"
    assert [r.split()[0] for r in page.locator("table.queue tbody tr td:nth-child(3)").all_inner_texts()] == CLASS
    assert set(page.locator("table.queue .tag.pending").all_inner_texts()) == {"10 of 10 items to grade"}
    check_and_photograph(page, f"the grading queue at {width} px", f"queue-{name}")
    page.context.close()


@pytest.mark.parametrize("name, width", list(WIDTHS.items()))
def test_the_grading_view_fits_and_shows_the_comment_under_its_line(site, name, width):
    page = site.page(width)
    page.goto(site.url + "/instructor/assignments/cap/grading/2#L12")
    comment = page.locator("#L12 + .line-comment")
    assert COMMENT in comment.inner_text(), "the comment sits right under line 12"
    assert page.locator("#queue-place").inner_text().startswith("1 of 4")
    check_and_photograph(page, f"the grading view at {width} px", f"view-{name}")
    page.context.close()


@pytest.mark.parametrize("name, width", list(WIDTHS.items()))
def test_the_student_reads_the_comments_on_their_own_source(site, name, width):
    page = site.page(width, "alice")
    page.goto(site.url + "/submissions/2")
    page.locator("#source-link").click()
    page.wait_for_url("**/submissions/2/source")
    assert COMMENT in page.locator("#L12 + .line-comment").inner_text()
    assert page.locator("textarea").count() == 0, "read-only"
    check_and_photograph(page, f"the student's source at {width} px", f"student-source-{name}")
    page.context.close()


@pytest.mark.parametrize("name, width", list(WIDTHS.items()))
def test_regrade_all_asks_with_the_number(site, name, width):
    page = site.page(width)
    page.goto(site.url + "/instructor/")
    page.get_by_role("link", name="Regrade all of cap").click()
    page.wait_for_url("**/instructor/assignments/cap/regrade")
    assert "This regrades the 4 counted submissions" in page.locator("#regrade-count").inner_text()
    assert page.get_by_role("button", name="Regrade 4 counted submissions").is_visible()
    check_and_photograph(page, f"the regrade question at {width} px", f"regrade-{name}")
    page.context.close()


def test_an_instructor_comments_grades_and_goes_on_to_the_next(site):
    page = site.page(1280)
    page.goto(site.url + "/instructor/assignments/cap/grading")
    page.get_by_role("link", name="Start grading with the first").click()
    page.wait_for_url("**/grading/2")
    page.locator("#L20 a.ln").click()
    assert page.url.endswith("#L20"), "a line number is a link to its line"
    page.fill("#comment-form input[name=line]", "20")
    page.fill("#comment-form textarea[name=text]", "Good: the mask is applied before the softmax.")
    page.get_by_role("button", name="Add the comment").click()
    page.wait_for_url("**/grading/2#L20")
    assert "the mask is applied" in page.locator("#L20 + .line-comment").inner_text()
    page.fill("input[name=points_spec_contract]", "7")
    page.get_by_role("button", name="Save and go to the next").click()
    page.wait_for_url("**/grading/3")
    assert "Saved 1 manual grade of submission 2" in page.locator(".flash").inner_text()
    assert "Bob" in page.locator("h1").inner_text()
    page.locator("#queue-prev").click()
    page.wait_for_url("**/grading/2")
    assert page.locator("#queue-place").inner_text().startswith("1 of 4"), \
        "9 of 10 items left: still in 'needs grading'"
    page.goto(site.url + "/instructor/assignments/cap/grading")
    row = page.locator("table.queue tbody tr", has_text="alice")
    assert "9 of 10 items to grade" in row.inner_text(), "the row says how many items are left"
    page.context.close()


def test_an_instructor_shares_the_queue_round_robin(site):
    page = site.page(1280)
    page.goto(site.url + "/instructor/assignments/cap/grading")
    page.locator("input[name=grader_to][value=prof]").check()
    page.locator("input[name=grader_to][value=ada]").check()
    page.get_by_role("button", name="Assign all unassigned").click()
    page.wait_for_load_state()
    assert "Assigned 4 submissions: 2 to ada, 2 to prof" in page.locator(".flash").inner_text()
    page.select_option("select[name=grader]", "mine")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**grader=mine**")
    assert page.locator("table.queue tbody tr").count() == 2
    assert set(page.locator("table.queue tbody td:last-child").all_inner_texts()) == {"prof"}
    page.context.close()
