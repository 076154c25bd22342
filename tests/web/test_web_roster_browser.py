"""The roster page in headless Chromium, at 1280 px and on a 390 px phone: an instructor deactivates a student, gives
another a new token (shown once) and removes a third after the confirmation page, by clicking; a bad import lists
every bad row. axe-core finds no serious or critical violation and nothing is wider than the window.
Screenshots: docs/screenshots/roster-*.png.

The app runs on SQLite over real HTTP (nothing grades), so this takes seconds.
"""
import pytest

from tests.service.svc_helpers import make_course

from .browser_support import SCREENSHOTS, WIDTHS, check_page, new_page, served, signed_in_state, sqlite_app
from .web_helpers import PASSWORD

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """alice and bob (make_course), carol and dmitri with e-mails, and the instructor prof, signed in."""
    from grader.app import accounts
    from grader.app.db import get_db
    with sqlite_app(tmp_path_factory.mktemp("roster"), ENFORCE_ATTEMPTS=False) as app:
        make_course(app)
        with app.app_context(), get_db(app).session() as s:
            accounts.create_instructor(s, "prof", PASSWORD, "Prof. Ada")
            accounts.add_student(s, "carol", "Carol Chen", "carol.chen@example.edu")
            accounts.add_student(s, "dmitri", "Dmitri Mendeleev", "dmitri@example.edu")
            s.commit()
        with served(app) as (browser, url):
            yield Site(browser, url, signed_in_state(browser, url, "prof"))


class Site:
    def __init__(self, browser, url, state):
        self.browser, self.url, self.state = browser, url, state

    def page(self, width: int):
        return new_page(self.browser, width, storage_state=self.state)


def check_and_photograph(page, what: str, name: str) -> None:
    check_page(page, what, SCREENSHOTS / f"roster-{name}.png")


def state_of(page, username: str) -> str:
    return page.locator(f"#student-{username} td:nth-child(4)").inner_text().strip()


def test_an_instructor_deactivates_rotates_and_removes_by_clicking(site):
    page = site.page(1280)
    page.goto(site.url + "/instructor/roster")
    page.get_by_role("button", name="Deactivate bob").click()
    page.wait_for_url("**/instructor/roster")
    assert "bob is deactivated" in page.locator(".flash").inner_text()
    assert state_of(page, "bob") == "deactivated"
    assert page.get_by_role("button", name="Reactivate bob").is_visible()
    page.get_by_role("button", name="New token for carol (the old ones stop working)").click()
    page.wait_for_load_state()
    token = page.locator("#rotated-token").inner_text()
    assert token.startswith("gr_") and "shown only this once" in page.locator("#rotated").inner_text()
    page.get_by_role("link", name="Remove dmitri…").click()
    page.wait_for_url("**/instructor/roster/dmitri/remove")
    assert "Remove dmitri (Dmitri Mendeleev)?" in page.locator("h1").inner_text()
    page.get_by_role("button", name="Remove dmitri").click()
    page.wait_for_url("**/instructor/roster")
    assert "dmitri is removed from the roster and the gradebook" in page.locator(".flash").inner_text()
    assert page.locator("#student-dmitri").count() == 0
    page.get_by_role("link", name="Show removed students").click()
    page.wait_for_url("**/instructor/roster?removed=1")
    assert state_of(page, "dmitri") == "removed"
    page.context.close()


def test_a_bad_import_lists_every_bad_row(site):
    page = site.page(1280)
    page.goto(site.url + "/instructor/roster")
    page.fill("textarea[name=text]", "username,name,email\nerin,Erin,erin@example.edu\nbad user!,B,\nfay,Fay,x\n")
    page.get_by_role("button", name="Import").click()
    page.wait_for_load_state()
    problems = page.locator("#roster-error li").all_inner_texts()
    assert len(problems) == 2 and problems[0].startswith("Line 3: username 'bad user!'"), problems
    assert problems[1].startswith("Line 4: e-mail 'x'"), problems
    assert page.locator("#student-erin").count() == 0, "nothing imported"
    check_and_photograph(page, "a refused import at 1280 px", "refused-desktop")
    page.context.close()


@pytest.mark.parametrize("name, width", list(WIDTHS.items()))
def test_the_roster_and_the_remove_question_fit_and_are_photographed(site, name, width):
    page = site.page(width)
    page.goto(site.url + "/instructor/roster")
    assert page.locator("table.roster tbody tr").count() >= 3
    check_and_photograph(page, f"the roster at {width} px", name)
    page.goto(site.url + "/instructor/roster/alice/remove")
    assert page.get_by_role("button", name="Remove alice").is_visible()
    check_and_photograph(page, f"the remove question at {width} px", f"remove-{name}")
    page.context.close()
