"""The class analytics page in headless Chromium, at 1280 px and on a 390 px phone: what an instructor reads there
(pass rates, the diagnosis groups with links to their examples, the switch to every submission), axe-core finds no
serious or critical violation, nothing is wider than the window. Screenshots: docs/screenshots/analytics-*.png.

The app runs on SQLite over real HTTP, graded in this process with stand-in reports carrying the real judge's messages
(tests/feedback/reports.py), so this takes seconds.
"""
import io
from datetime import datetime, timedelta

import pytest
from sqlalchemy import update

from tests.feedback.reports import ALL, SCALE, SPLIT, report, split_root_cause
from tests.service.svc_helpers import make_course

from .browser_support import SCREENSHOTS, WIDTHS, check_page, new_page, served, signed_in_state, sqlite_app
from .web_helpers import PASSWORD, REFERENCE, grade_now

pytestmark = [pytest.mark.browser]
PAGE = "/instructor/assignments/cap/analytics"


def other_numbers(message: str, n: int) -> str:
    """The same bug as another student's run reports it: other values."""
    return message.replace("3.91", f"{3 + n / 7:.3g}").replace("0.471", f"{0.3 + n / 50:.3g}")


def failing(check: str, message: str, status: str = "fail") -> dict:
    return report({}, **{check: {"status": status, "message": message, "details": [message]}})


# (student, reports in upload order): the counted one is each student's best
CLASS = [
    ("ana", [split_root_cause(), report({})]),
    ("ben", [failing("split_heads", other_numbers(SPLIT, 1))]),
    ("chloe", [failing("split_heads", other_numbers(SPLIT, 2)), failing("split_heads", other_numbers(SPLIT, 3))]),
    ("dev", [failing("attention_sdpa", other_numbers(SCALE, 1))]),
    ("emma", [failing("attention_sdpa", other_numbers(SCALE, 2)), report({})]),
    ("femi", [failing("rope", "your code raised NotImplementedError: write apply_rope", "error")]),
    ("gita", [report({})]),
]


def broken_judge(*args):
    raise RuntimeError("no runner interpreter")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The class above graded over two days, one upload the service gave up on, and the instructor prof."""
    from grader.app import accounts
    from grader.app.accounts import issue_token
    from grader.app.db import get_db
    from grader.app.models import Submission
    from worker import grading
    with sqlite_app(tmp_path_factory.mktemp("analytics"), ENFORCE_ATTEMPTS=False, MAX_ATTEMPTS=1) as app:
        course = make_course(app, checks=list(ALL))
        client, n, t0 = app.test_client(), 0, datetime(2026, 12, 1, 8, 0)
        with app.app_context(), get_db(app).session() as s:
            accounts.create_instructor(s, "prof", PASSWORD, "Prof. Ada")
            tokens = {name: issue_token(s, "student", accounts.add_student(s, name, name.title()))[1]
                      for name, _ in CLASS}
            s.commit()
        for name, reports in CLASS + [("gita", [None])]:
            for rep in reports:
                n += 1
                r = client.post("/api/v1/assignments/cap/submissions", content_type="multipart/form-data",
                                headers={"Authorization": f"Bearer {tokens[name]}"},
                                data={"file": (io.BytesIO(REFERENCE + f"# {n}\n".encode()), f"v{n}.py")})
                assert r.status_code == 202, r.get_json()
                if rep is None:  # the service gives up on this one
                    grading.grade(app, n, judge=broken_judge)
                else:
                    grade_now(app, n, rep)
                with get_db(app).Session() as s:  # spread over two days, each grading taking its own time
                    at = t0 + timedelta(hours=5 * n)
                    s.execute(update(Submission).where(Submission.id == n).values(
                        created_at=at, started_at=at, finished_at=at + timedelta(seconds=20 + 13 * n)))
                    s.commit()
        with served(app) as (browser, url):
            yield Site(browser, url)


class Site:
    def __init__(self, browser, url):
        self.browser, self.url, self.state = browser, url, None

    def page(self, width: int):
        """A page signed in as prof, in a window `width` px wide."""
        if self.state is None:
            self.state = signed_in_state(self.browser, self.url, "prof")
        return new_page(self.browser, width, storage_state=self.state)


@pytest.mark.parametrize("name, width", list(WIDTHS.items()))
def test_the_page_fits_axe_finds_nothing_serious_and_it_is_photographed(site, name, width):
    page = site.page(width)
    page.goto(site.url + PAGE)
    assert page.locator("h1").inner_text().startswith("Analytics")
    check_page(page, f"analytics at {width} px")
    page.locator("details.item-charts summary").click()  # the per-item histograms, opened
    assert page.locator("details.item-charts svg.chart-histogram").first.is_visible()
    check_page(page, f"analytics with the item histograms at {width} px", SCREENSHOTS / f"analytics-{name}.png")
    page.context.close()


def test_an_instructor_reads_the_class_and_opens_an_example(site):
    page = site.page(1280)
    page.goto(site.url + PAGE)
    split = page.locator("table.analytics-checks tbody tr", has_text="split_heads")
    cells = [c.strip() for c in split.locator("td").all_inner_texts()]
    # counted: ana and emma and gita pass (their best), ben and chloe fail; dev and femi pass split_heads
    assert cells[1:4] == ["71%", "5", "2"], cells
    group = page.locator("table.analytics-diagnoses tbody tr", has_text="split_heads").filter(
        has_not_text="Root cause").first
    assert "ben" in group.inner_text() and "chloe" in group.inner_text(), group.inner_text()
    assert group.locator("td.num").first.inner_text() == "2", "ben and chloe, one diagnosis"
    failed = page.locator("table.analytics-failing tbody tr")
    assert failed.count() == 1 and "no runner interpreter" in failed.inner_text()
    slowest = page.locator("table.analytics-slowest tbody tr").first
    assert "gita" in slowest.inner_text(), "gita's graded upload took longest"
    bars = page.locator("svg.chart-time rect.bar")
    assert bars.count() >= 4, "uploads per hour or day"
    example = group.locator("a", has_text="ben")
    number = example.inner_text().split()[0].lstrip("#")
    example.click()
    page.wait_for_url(f"**/instructor/submissions/{number}")
    assert "Ben" in page.locator("h1").inner_text(), "the example is ben's submission"
    page.context.close()


def test_switching_to_every_submission_counts_the_earlier_uploads(site):
    page = site.page(1280)
    page.goto(site.url + PAGE)
    page.select_option("select[name=basis]", "all")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**basis=all**")
    assert "every graded submission" in page.locator("#basis-text").inner_text()
    split = page.locator("table.analytics-checks tbody tr", has_text="split_heads")
    cells = [c.strip() for c in split.locator("td").all_inner_texts()]
    assert cells[1:4] == ["60%", "6", "4"], f"ana's and chloe's earlier failing uploads count now: {cells}"
    scale = page.locator("table.analytics-diagnoses tbody tr", has_text="attention_sdpa")
    assert scale.count() == 1 and scale.locator("td.num").first.inner_text() == "2", "dev's and emma's scale bug"
    page.context.close()
