"""Headless Chromium for the browser tests, and what they ask of every page: axe-core finds no serious or critical
violation, and nothing is wider than the window (a phone at 390 px scrolls no page sideways).

Chromium is Debian's, driven by Playwright (which cannot download a browser here).

axe-core comes from npm (scripts/install-browser.sh puts it in build/axe). The pages' CSP (script-src 'self') blocks
an injected <script> element, page.add_script_tag included, so the file's text is evaluated through the DevTools
protocol (page.evaluate), to which a page's CSP does not apply: the pages are checked exactly as served.

What every browser module's site shares is here too: the app on SQLite over real HTTP (sqlite_app, served), pages
signed in through the form (sign_in, signed_in_state, new_page), and the checks with a screenshot (check_page).
"""
import contextlib
import os
from pathlib import Path

import pytest

from tests.ci import missing
from tests.service.svc_cluster import LiveServer
from tests.service.svc_helpers import make_app

from .web_helpers import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
WIDTHS = {"desktop": 1280, "phone": 390}  # every page is checked at both
CHROMIUM = os.environ.get("GRADER_CHROMIUM", "/usr/bin/chromium")
# No network of its own, no GPU.
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
AXE = Path(os.environ.get("GRADER_AXE", ROOT / "build" / "axe" / "node_modules" / "axe-core" / "axe.min.js"))
BLOCKING = ("serious", "critical")


def browser_missing(reason: str):
    """A skip with the reason locally; in CI, which installs it with scripts/install-browser.sh, a failure."""
    missing(f"{reason}; scripts/install-browser.sh installs it")


@contextlib.contextmanager
def launched():
    """Chromium for a module's tests (skipped, or failed in CI, when Playwright or Chromium is missing)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        browser_missing("the playwright package is not installed (pip install -e '.[test]')")
    if not os.access(CHROMIUM, os.X_OK):
        browser_missing(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def axe_source() -> str:
    """axe.min.js; skipped locally when absent (a failure in CI, which installs it)."""
    if not AXE.is_file():
        browser_missing(f"axe-core is not installed at {AXE}")
    return AXE.read_text(encoding="utf-8")


def axe_violations(page, impacts=BLOCKING) -> list[str]:
    """One line per violation of the given impacts: the rule, what it asks, and each element (CSS selector) failing."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(axe_source())
    found = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [f"{v['id']} ({v['impact']}: {v['help']}) at "
            + "; ".join(" ".join(map(str, node["target"])) for node in v["nodes"])
            for v in found["violations"] if v["impact"] in impacts]


def assert_accessible(page, what: str) -> None:
    violations = axe_violations(page)
    assert not violations, f"axe-core on {what}:\n  " + "\n  ".join(violations)


def page_width(page) -> int:
    """How wide the document is: more than the window means the page scrolls sideways."""
    return page.evaluate("document.documentElement.scrollWidth")


def assert_fits(page, what: str) -> int:
    """The page is no wider than the window, and the header's Sign out (when signed in) is inside it."""
    width, window = page_width(page), page.viewport_size["width"]
    if width > window:
        wide = page.evaluate("""w => Array.from(document.querySelectorAll('body *'))
            .filter(e => e.getBoundingClientRect().right > w + 1 && !e.parentElement.closest('.table-scroll, pre'))
            .slice(0, 8).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + e.className
                             + ' ' + Math.round(e.getBoundingClientRect().right))""", window)
        raise AssertionError(f"{what} is {width} px wide in a {window} px window; too wide: {wide}")
    sign_out = page.locator("header.top button", has_text="Sign out")
    if sign_out.count():
        box = sign_out.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= window, f"{what}: Sign out is off the header: {box}"
    return width


def check_page(page, what: str, screenshot: Path | None = None) -> int:
    """What every page must pass: no sideways scroll, axe-core finds nothing serious, no script error (page.errors,
    see new_page); then a full-page screenshot when given a path. Returns how wide the page is."""
    width = assert_fits(page, what)
    assert_accessible(page, what)
    assert not page.errors, f"script errors on {what}: {page.errors}"
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
    return width


@contextlib.contextmanager
def sqlite_app(tmp: Path, **config):
    """The whole app on SQLite in the folder `tmp` (its instance folder there too), for a module's browser tests."""
    from grader.app.db import get_db
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADER_INSTANCE_PATH", str(tmp / "instance"))
        app = make_app(f"sqlite:///{tmp}/grader.sqlite", tmp, **config)
        yield app
        get_db(app).engine.dispose()


@contextlib.contextmanager
def served(app):
    """The app over real HTTP, and Chromium to browse it: (browser, the server's URL)."""
    server = LiveServer(app).start()
    with launched() as browser:
        yield browser, server.url
    server.stop()


def new_page(browser, width: int, height: int = 900, storage_state: dict | None = None):
    """A page of a fresh context, `width` px wide (signed in when given a storage_state); its script errors are
    collected in page.errors."""
    context = browser.new_context(viewport={"width": width, "height": height}, storage_state=storage_state)
    page = context.new_page()
    page.set_default_timeout(10000)
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return page


def sign_in(page, url: str, who: str, token: str | None = None) -> None:
    """Sign in through the form: a student with their token, else the instructor `who` with the tests' password."""
    if token is None:
        page.goto(url + "/instructor/signin")
        page.fill("input[name=username]", who)
        page.fill("input[name=password]", PASSWORD)
    else:
        page.goto(url + "/signin")
        page.fill("input[name=username]", who)
        page.fill("input[name=token]", token)
    page.click("button.primary")
    page.wait_for_load_state()


def signed_in_state(browser, url: str, who: str, token: str | None = None) -> dict:
    """The cookies of one sign-in through the form (sign_in), for new contexts to start from."""
    context = browser.new_context()
    sign_in(context.new_page(), url, who, token)
    state = context.storage_state()
    context.close()
    return state
