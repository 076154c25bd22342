"""The course rules in headless Chromium (issue 17): a student reads each assignment's rules before uploading, sees
what a late upload costs (and the notice appear by itself once their extension has passed, without a reload), cannot
choose a closed or unopened assignment, and picks the submission that counts; an instructor sets the rules and gives
an extension. Every page: axe-core finds nothing serious, nothing is wider than the window. Screenshots at 1280 and
390 px go to docs/screenshots/rules-*.png.

The app runs on SQLite over real HTTP, graded in this process with stand-in reports (as test_web_a11y.py).
"""
from datetime import datetime, timedelta, timezone

import pytest

from tests.service.svc_helpers import make_course

from .browser_support import (SCREENSHOTS, WIDTHS, assert_accessible, check_page, new_page, served, sign_in,
                              sqlite_app)
from .web_helpers import PASSWORD, REFERENCE, graded_report, grade_now, sign_in_student, upload

pytestmark = [pytest.mark.browser]


def iso(delta: timedelta) -> str:
    return (datetime.now(timezone.utc) + delta).replace(second=0, microsecond=0).isoformat()


def local(delta: timedelta) -> str:
    """A datetime-local input's value, in UTC as the settings page says."""
    return (datetime.now(timezone.utc) + delta).strftime("%Y-%m-%dT%H:%M")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """cap (counts the chosen one; alice has an extension and 2 extra attempts; two graded uploads of hers), 'late'
    (due two days ago), 'soon' (opens in five days), 'old' (closed), 'secret' (a draft); the instructor prof."""
    from grader.app import accounts, extensions, store
    from grader.app.db import get_db
    with sqlite_app(tmp_path_factory.mktemp("rules-browser"), ENFORCE_ATTEMPTS=True, WEB_POLL_S=60) as app:
        course = make_course(app, due_at=iso(timedelta(days=3)), counts="chosen", late_penalty_per_day=0.1)
        with app.app_context(), get_db(app).session() as s:
            store.create_assignment(s, "late", title="Week 1 exercise", due_at=iso(-timedelta(days=1, hours=20)),
                                    late_penalty_per_day=0.1, late_penalty_max=0.5)
            store.create_assignment(s, "soon", title="Week 3 exercise", opens_at=iso(timedelta(days=5)))
            store.create_assignment(s, "old", title="Warm-up", state="closed")
            store.create_assignment(s, "secret", title="Draft project", state="draft")
            accounts.create_instructor(s, "prof", PASSWORD, "Prof. Ada")
            extensions.set_extension(s, store.get_assignment(s, "cap"), accounts.get_student(s, "alice"),
                                     due_at=iso(timedelta(days=6, hours=1)), extra_attempts=2, reason="medical certificate")
            s.commit()
        client = app.test_client()
        sign_in_student(client, "alice", course.alice)
        upload(client, REFERENCE + b"# first\n", "first.py")
        grade_now(app, 1, graded_report(fail_split=False))
        upload(client, REFERENCE + b"# second\n", "second.py")
        grade_now(app, 2, graded_report(fail_split=True))
        with served(app) as (browser, url):
            yield Site(browser, url, course)


class Site:
    def __init__(self, browser, url, course):
        self.browser, self.url, self.course = browser, url, course

    def page(self, who: str, width: int = 1280):
        """A page signed in through the form as `who`, `width` px wide."""
        page = new_page(self.browser, width)
        sign_in(page, self.url, who, None if who == "prof" else getattr(self.course, who))
        return page


def check_and_photograph(page, name: str, width: int, shot: bool = True) -> None:
    """axe-core clean, no sideways scroll, no script error; a screenshot in docs/screenshots."""
    check_page(page, f"{name} at {width} px", SCREENSHOTS / f"rules-{name}-{width}.png" if shot else None)


@pytest.mark.parametrize("width", list(WIDTHS.values()), ids=list(WIDTHS))
def test_a_student_reads_the_rules_before_uploading(site, width):
    page = site.page("alice", width)
    page.goto(site.url + "/submit")
    cap = page.locator("#rules-cap").inner_text()
    assert "Extended for you to" in cap and "(due " in cap and "for the class), 6 days left." in cap, cap
    assert "10 of 12 attempts left today." in cap, "10 a day plus her 2 extra, 2 used"
    assert "The submission you choose counts" in cap
    late = page.locator("#rules-late")
    assert late.locator(".late-notice").is_visible()
    assert late.locator(".late-notice").inner_text() == "This upload is 2 days late: it loses 20% of its score."
    assert page.locator("#rules-soon").inner_text().count("Opens ") == 1
    assert "Closed: uploads are no longer accepted." in page.locator("#rules-old").inner_text()
    assert page.locator("#rules-secret").count() == 0 and "Draft project" not in page.content()
    options = {o.get_attribute("value"): (o.inner_text(), o.is_disabled())
               for o in page.locator("select[name=assignment] option").all()}
    assert options["old"] == ("Warm-up (old): closed: uploads are no longer accepted", True)
    assert options["soon"][1] and "opens " in options["soon"][0]
    assert not options["cap"][1] and not options["late"][1] and "secret" not in options
    check_and_photograph(page, "submit", width)
    page.context.close()


def test_the_late_notice_appears_by_itself_once_the_extension_has_passed(site):
    page = site.page("alice")
    page.clock.install(time=datetime.now(timezone.utc))  # the page's own clock; the server's is real time
    page.goto(site.url + "/submit")
    notice = page.locator("#rules-cap .late-notice")
    assert notice.count() == 1 and not notice.is_visible(), "on time inside the extension: no notice"
    page.clock.fast_forward(147 * 3600 * 1000)  # 6 days and 3 hours (ms): two hours past her extension
    notice.wait_for(state="visible")
    assert notice.inner_text() == "This upload is 1 day late: it loses 10% of its score."
    page.context.close()


@pytest.mark.parametrize("width", list(WIDTHS.values()), ids=list(WIDTHS))
def test_a_student_chooses_the_submission_that_counts(site, width):
    page = site.page("alice", width)
    page.goto(site.url + "/submissions")
    counted = page.locator("tr.counted")
    assert counted.count() == 1
    if width == WIDTHS["desktop"]:
        assert counted.get_attribute("id") == "sub-2", "until she chooses, her latest counts"
        page.get_by_role("button", name="Count this one: submission 1").click()
        page.wait_for_url("**/submissions#sub-1")
        assert "Submission 1 now counts for Capstone." in page.locator(".flash").inner_text()
    assert page.locator("tr.counted").get_attribute("id") == "sub-1"
    assert page.locator("tr#sub-1 .counts-tag").inner_text() == "counts"
    assert page.get_by_role("button", name="Count this one: submission 2").is_visible()
    check_and_photograph(page, "history", width)
    page.goto(site.url + "/submissions/2")
    assert "Your submission 1 is the one that counts for Capstone" in page.locator("#counts-line").inner_text()
    assert "Extended for you to" in page.locator("#rules-cap").inner_text()
    check_and_photograph(page, "result", width)
    page.context.close()


@pytest.mark.parametrize("width", list(WIDTHS.values()), ids=list(WIDTHS))
def test_an_instructor_sets_the_rules_and_gives_an_extension(site, width):
    page = site.page("prof", width)
    page.goto(site.url + "/instructor/")
    page.get_by_role("link", name="Settings & extensions of late").click()
    page.wait_for_url("**/instructor/assignments/late/settings")
    assert "All times are UTC" in page.locator("#settings").inner_text()
    # a mistake the browser lets through (it checks numbers itself): the page comes back with it, and why
    page.fill("input[name=opens_at]", local(timedelta(days=10)))
    page.fill("input[name=due_at]", local(timedelta(days=5)))
    page.fill("input[name=late_per_day]", "15")
    page.click("#settings button.primary")
    page.wait_for_load_state()
    assert page.locator("#due_at-error").inner_text() == "the due date must be after the opening"
    assert page.input_value("input[name=late_per_day]") == "15", "what was typed is kept"
    assert page.input_value("input[name=opens_at]") == local(timedelta(days=10))
    assert_accessible(page, f"the refused settings form at {width} px")
    page.fill("input[name=opens_at]", "")
    page.fill("input[name=due_at]", "")
    page.fill("input[name=grace_minutes]", "30")
    page.click("#settings button.primary")
    page.wait_for_load_state()
    assert "Saved the settings of late." in page.locator(".flash").inner_text()
    assert "Late uploads lose 15% of their score per started day late (after 30 minutes of grace), at most 50%." \
        in page.locator("#class-rules").inner_text()
    if width == WIDTHS["desktop"]:
        page.select_option("select[name=student]", "bob")
        page.fill("input[name=until]", local(timedelta(days=4)))
        page.fill("input[name=reason]", "family emergency")
        page.click("#extensions button.primary")
        page.wait_for_load_state()
        assert "bob has an extension on late." in page.locator(".flash").inner_text()
    row = page.locator("table.extensions tbody tr", has_text="bob")
    assert row.count() == 1 and "family emergency" in row.inner_text()
    check_and_photograph(page, "settings", width)
    page.goto(site.url + "/instructor/assignments")
    assert "Draft project (secret)" in page.locator("table.list").inner_text(), "every assignment, drafts too"
    check_and_photograph(page, "assignments", width, shot=False)
    page.context.close()
