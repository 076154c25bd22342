"""The course rules on the pages (issue 17): the sentences students read (grader/app/rules_text.py, pure), the submit
page's rules, late notice and assignment choices, the counted submission on the history page, and the instructor's
assignment settings page with its extensions and rubric upload."""
import re
from datetime import datetime, timedelta, timezone

import pytest

from grader.app import rules_text
from grader.app.rules import Rules

from .web_helpers import csrf, graded_report, grade_now, sign_in_instructor, sign_in_student, text_of, upload

UTC = timezone.utc
DUE = datetime(2026, 12, 18, 23, 59, tzinfo=UTC)  # a Friday
NOW = datetime(2026, 12, 15, 12, 0, tzinfo=UTC)


def rules(**fields) -> Rules:
    """The packaged rubric's policy as Rules (due Friday 18 Dec 23:59 UTC, 15 minutes' grace, 10% a day, at most 50%)."""
    base = dict(state="open", opens_at=None, due_at=DUE, extended_until=None, grace_minutes=15.0, late_per_day=0.1,
                late_max=0.5, attempts=10, period="day", timezone="UTC", counts="best", rubric=None)
    return Rules(**{**base, **fields})


def attempts(left, allowed=10, period="day", resets_at=None) -> dict:
    return {"allowed": allowed, "used": allowed - left, "left": left, "period": period, "resets_at": resets_at}


# ---------------------------------------------------------------- the words (pure)

def test_an_open_assignment_reads_as_the_issue_says():
    assert rules_text.describe(rules(), attempts(7), NOW) == [
        "Due Friday 18 Dec 23:59 UTC, 3 days left.", "7 of 10 attempts left today.", "Your best submission counts.",
        "Late uploads lose 10% of their score per started day late (after 15 minutes of grace), at most 50%."]


@pytest.mark.parametrize("fields, now, expected", [
    (dict(extended_until=datetime(2026, 12, 21, 23, 59, tzinfo=UTC)), NOW,
     "Extended for you to Monday 21 Dec 23:59 UTC (due Friday 18 Dec 23:59 UTC for the class), 6 days left."),
    (dict(opens_at=datetime(2026, 12, 16, 9, 0, tzinfo=UTC)), NOW,
     "Opens Wednesday 16 Dec 09:00 UTC, in 21 hours; due Friday 18 Dec 23:59 UTC."),
    (dict(state="closed"), datetime(2026, 12, 20, tzinfo=UTC),
     "Closed on Friday 18 Dec 23:59 UTC: uploads are no longer accepted."),
    (dict(state="closed"), NOW, "Closed: uploads are no longer accepted."),
    (dict(), datetime(2026, 12, 21, 0, 0, tzinfo=UTC), "Was due Friday 18 Dec 23:59 UTC, 2 days ago."),
    (dict(), datetime(2026, 12, 20, 23, 0, tzinfo=UTC), "Was due Friday 18 Dec 23:59 UTC, 47 hours ago."),
    (dict(due_at=None), NOW, "No due date."),
    (dict(), datetime(2026, 12, 18, 23, 30, tzinfo=UTC), "Due Friday 18 Dec 23:59 UTC, 29 minutes left."),
    (dict(), datetime(2025, 12, 18, tzinfo=UTC), "Due Friday 18 Dec 2026 23:59 UTC, 365 days left."),
], ids=["extended", "not-yet-open", "closed-after-due", "closed-early", "passed", "passed-hours", "no-due-date", "minutes", "year"])
def test_the_dates_in_words(fields, now, expected):
    assert rules_text.describe(rules(**fields), None, now)[0] == expected


@pytest.mark.parametrize("fields, expected", [
    (dict(counts="latest"), "Your latest submission counts."),
    (dict(counts="chosen"), "The submission you choose counts (until you choose one, your latest counts)."),
    (dict(late_per_day=0.0), "Late uploads are accepted without a penalty (after 15 minutes of grace)."),
    (dict(grace_minutes=0.0, late_max=1.0), "Late uploads lose 10% of their score per started day late."),
    (dict(grace_minutes=1.0, late_per_day=0.125), "Late uploads lose 12.5% of their score per started day late "
                                                  "(after 1 minute of grace), at most 50%."),
], ids=["latest", "chosen", "no-penalty", "no-grace-no-cap", "fractions"])
def test_the_policy_in_words(fields, expected):
    assert expected in rules_text.describe(rules(**fields), None, NOW)


def test_attempts_in_words():
    resets = datetime(2026, 12, 16, tzinfo=UTC)
    assert rules_text.attempts_words(attempts(0, resets_at=resets), NOW) == \
        "You have used all 10 attempts today; you can submit again from Wednesday 16 Dec 00:00 UTC."
    assert rules_text.attempts_words(attempts(1, 3, "week"), NOW) == "1 of 3 attempts left this week."
    assert rules_text.attempts_words(attempts(1, 1, "term"), NOW) == "1 of 1 attempt left for this assignment."
    assert rules_text.attempts_words({"allowed": 0, "left": None, "period": "day"}, NOW) is None, "unlimited"
    assert "attempts" not in " ".join(rules_text.describe(rules(state="closed"), attempts(3), NOW)), \
        "a closed assignment says nothing of attempts"


@pytest.mark.parametrize("at, fraction, expected", [
    (datetime(2026, 12, 18, 23, 0, tzinfo=UTC), 0.0, None),
    (datetime(2026, 12, 19, 0, 10, tzinfo=UTC), 0.0,
     "The deadline has passed, but you are within the 15 minutes of grace: this upload loses nothing."),
    (datetime(2026, 12, 20, 23, 0, tzinfo=UTC), 0.2, "This upload is 2 days late: it loses 20% of its score."),
    (datetime(2026, 12, 29, tzinfo=UTC), 0.5,
     "This upload is 10 days late: it loses 50% of its score (the most a late upload can lose)."),
], ids=["on-time", "in-grace", "two-days", "capped"])
def test_what_a_late_upload_costs(at, fraction, expected):
    from grader.app.rules import late_fraction
    r = rules()
    assert late_fraction(r, at) == fraction, "the notice's number is the score's (rules.late_fraction)"
    assert rules_text.late_notice(r, late_fraction(r, at), at) == expected


def test_an_extension_moves_the_late_notice():
    at = datetime(2026, 12, 20, tzinfo=UTC)
    r = rules(extended_until=datetime(2026, 12, 21, 23, 59, tzinfo=UTC))
    assert rules_text.late_notice(r, 0.0, at) is None, "inside the student's extension an upload is on time"


# ---------------------------------------------------------------- the student's pages

def settle(app, slug="cap", **fields):
    """Set the assignment's rules through the store, as the instructor pages and the API do."""
    from grader.app import store
    from grader.app.db import get_db
    with app.app_context(), get_db(app).session() as s:
        store.update_assignment(s, slug, **fields)
        s.commit()


def iso(delta: timedelta) -> str:
    return (datetime.now(UTC) + delta).replace(microsecond=0).isoformat()


@pytest.fixture
def alice(web_app, client, course):
    web_app.config["ENFORCE_ATTEMPTS"] = True
    sign_in_student(client, "alice", course.alice)
    return client


def rules_of(page, slug="cap") -> str:
    """The text of one assignment's rules card."""
    html = page.get_data(as_text=True)
    found = re.search(rf'<section class="card rules" id="rules-{slug}".*?</section>', html, re.S)
    assert found, f"no rules card for {slug}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(0))).strip()


def test_the_submit_page_states_the_rules_before_an_upload(web_app, alice):
    settle(web_app, due_at=iso(timedelta(days=3, hours=2)), attempts_per_period=10)
    upload(alice)
    upload(alice, module=upload.__defaults__[0] + b"# two\n")
    card = rules_of(alice.get("/submit"))
    assert re.search(r"Due \w+ \d+ \w+ \d\d:\d\d UTC, 3 days left\.", card), card
    assert "8 of 10 attempts left today." in card, card
    assert "Your best submission counts." in card
    assert "Late uploads lose 10% of their score per started day late (after 15 minutes of grace), at most 50%." \
        in card


def test_a_late_upload_says_what_it_costs_before_it_is_sent(web_app, alice):
    settle(web_app, due_at=iso(-timedelta(days=1, hours=3)), late_penalty_per_day=0.1, grace_minutes=15)
    page = alice.get("/submit")
    html = page.get_data(as_text=True)
    notice = re.search(r'<p class="warn late-notice"[^>]*>(.*?)</p>', html, re.S)
    assert notice and "hidden" not in notice.group(0), "a late notice, shown by the server (no JavaScript needed)"
    assert notice.group(1) == "This upload is 2 days late: it loses 20% of its score."
    assert 'data-deadline="' in notice.group(0) and "rules.js" in html, "rules.js keeps it current on an open page"


def test_on_time_the_late_notice_is_there_but_hidden(web_app, alice):
    settle(web_app, due_at=iso(timedelta(hours=2)))
    html = alice.get("/submit").get_data(as_text=True)
    assert re.search(r'<p class="warn late-notice"[^>]*hidden[^>]*></p>', html), \
        "on time: an empty hidden notice that rules.js fills once the deadline passes"
    assert "late:" not in text_of(alice.get("/submit"))


def test_an_extension_is_shown_and_lifts_the_late_notice(web_app, alice):
    from grader.app import accounts, store
    from grader.app.db import get_db
    from grader.app.models import Extension
    settle(web_app, due_at=iso(-timedelta(days=1)))
    with web_app.app_context(), get_db(web_app).session() as s:
        s.add(Extension(assignment_id=store.get_assignment(s, "cap").id,
                        student_id=accounts.get_student(s, "alice").id,
                        due_at=(datetime.now(UTC) + timedelta(days=2, hours=1)).replace(tzinfo=None)))
        s.commit()
    page = alice.get("/submit")
    card = rules_of(page)
    assert re.search(r"Extended for you to \w+ \d+ \w+ \d\d:\d\d UTC \(due .* for the class\), 2 days left\.", card), \
        card
    assert "late:" not in text_of(page), "the extension covers an upload now"


@pytest.mark.parametrize("fields, reason", [
    (dict(state="closed"), "closed: uploads are no longer accepted"),
    (dict(opens_at="2099-01-01T09:00:00Z"), "opens Thursday 1 Jan 2099 09:00 UTC"),
], ids=["closed", "not-yet-open"])
def test_a_closed_or_unopened_assignment_cannot_be_chosen(web_app, alice, fields, reason):
    from grader.app.db import get_db
    from grader.app.models import Submission
    settle(web_app, **fields)
    html = alice.get("/submit").get_data(as_text=True)
    option = re.search(r'<option value="cap"[^>]*>[^<]*</option>', html).group(0)
    assert " disabled" in option and reason in option, option
    r = upload(alice)
    assert r.status_code == 422 and f"Capstone is {reason}." in text_of(r), text_of(r)[:500]
    with web_app.app_context(), get_db(web_app).session() as s:
        assert s.query(Submission).count() == 0


@pytest.mark.parametrize("state", ["draft", "archived"])
def test_drafts_and_archived_assignments_do_not_exist_for_students(web_app, alice, state):
    from grader.app import store
    from grader.app.db import get_db
    with web_app.app_context(), get_db(web_app).session() as s:
        store.create_assignment(s, "hidden1", title="Secret", state=state)
        s.commit()
    page = text_of(alice.get("/submit"))
    assert "Secret" not in page and "hidden1" not in page
    r = upload(alice, assignment="hidden1")
    assert r.status_code == 422 and "There is no assignment 'hidden1'." in text_of(r)


def test_the_result_page_says_the_rules_and_which_submission_counts(web_app, alice):
    upload(alice)
    grade_now(web_app, 1, graded_report())
    upload(alice, module=upload.__defaults__[0] + b"# two\n")
    grade_now(web_app, 2, graded_report(fail_split=False))
    text = text_of(alice.get("/submissions/2"))
    assert "counts This is the submission that counts for Capstone." in text
    assert "Your best submission counts." in text and "Capstone: the rules" in text
    assert "late:" not in text, "the result page never shows the notice for a new upload"
    assert "Your submission 2 is the one that counts for Capstone." in text_of(alice.get("/submissions/1"))


def counted_row(client) -> list[str]:
    html = client.get("/submissions").get_data(as_text=True)
    return re.findall(r'<tr id="sub-(\d+)" class="counted">', html)


def test_with_best_the_counted_one_is_marked_and_there_is_nothing_to_choose(web_app, alice):
    upload(alice)
    grade_now(web_app, 1, graded_report(fail_split=False))
    upload(alice, module=upload.__defaults__[0] + b"# two\n")
    grade_now(web_app, 2, graded_report())
    assert counted_row(alice) == ["1"], "the better one counts under 'best'"
    assert "Count this one" not in text_of(alice.get("/submissions"))


def test_with_chosen_the_student_picks_the_one_that_counts(web_app, alice):
    settle(web_app, counts="chosen")
    upload(alice)
    grade_now(web_app, 1, graded_report(fail_split=False))
    upload(alice, module=upload.__defaults__[0] + b"# two\n")
    grade_now(web_app, 2, graded_report())
    upload(alice, module=upload.__defaults__[0] + b"# three\n")  # queued: not choosable yet
    page = alice.get("/submissions")
    assert counted_row(alice) == ["3"], "until one is chosen the latest counts"
    html = page.get_data(as_text=True)
    assert len(re.findall(r'action="/submissions/\d+/choose"', html)) == 2, \
        "a button on each graded submission that does not count"
    assert 'action="/submissions/1/choose"' in html and 'action="/submissions/2/choose"' in html
    assert 'action="/submissions/3/choose"' not in html
    r = alice.post("/submissions/1/choose", data={"csrf_token": csrf(alice, "/submissions")})
    assert r.status_code == 303
    assert "Submission 1 now counts for Capstone." in text_of(alice.get(r.location))
    assert counted_row(alice) == ["1"]


def test_choosing_is_refused_without_csrf_for_another_or_under_best(web_app, alice, course):
    upload(alice)
    grade_now(web_app, 1, graded_report())
    assert alice.post("/submissions/1/choose").status_code == 400, "a form post without the session's token"
    r = alice.post("/submissions/1/choose", data={"csrf_token": csrf(alice, "/submissions")})
    assert r.status_code == 409 and "counts your best submission" in text_of(r)
    settle(web_app, counts="chosen")
    other = web_app.test_client()
    sign_in_student(other, "bob", course.bob)
    assert other.post("/submissions/1/choose", data={"csrf_token": csrf(other, "/submissions")}).status_code == 404
