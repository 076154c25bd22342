"""The course rules on the pages (issue 17): the sentences students read (grader/app/rules_text.py, pure), the submit
page's rules, late notice and assignment choices, the counted submission on the history page, and the instructor's
assignment settings page with its extensions and rubric upload."""
import io
import re
from datetime import datetime, timedelta, timezone

import pytest

from grader.app import rules_text
from grader.app.rules import Rules

from .web_helpers import ROOT, csrf, graded_report, grade_now, sign_in_instructor, sign_in_student, text_of, upload

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
    unopened = rules(opens_at=datetime(2026, 12, 16, tzinfo=UTC))
    assert "attempts" not in " ".join(rules_text.describe(unopened, attempts(3), NOW)), "nor one not open yet"


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


# ---------------------------------------------------------------- the instructor's settings page

SETTINGS = "/instructor/assignments/cap/settings"
RUBRIC_TEXT = (ROOT / "rubric" / "capstone.toml").read_text()


@pytest.fixture
def prof(client, course):
    sign_in_instructor(client)
    return client


def post(client, path: str, data: dict, files: dict | None = None):
    form = {"csrf_token": csrf(client, SETTINGS), **data}
    if files:
        form.update({k: (io.BytesIO(v[0]), v[1]) for k, v in files.items()})
        return client.post(path, data=form, content_type="multipart/form-data")
    return client.post(path, data=form)


def stored(app, slug="cap"):
    from grader.app import rules, store
    from grader.app.db import get_db
    with app.app_context(), get_db(app).session() as s:
        a = store.get_assignment(s, slug)
        return a.state, a.opens_at, a.due_at, dict(a.rules or {}), a.rubric_id, rules.rules_for(s, a)


FORM = {"title": "Capstone", "state": "open", "opens_at": "", "due_at": "", "grace_minutes": "", "late_per_day": "",
        "late_max": "", "attempts": "", "period": "", "counts": ""}


def test_the_settings_page_says_utc_and_what_each_blank_rule_falls_back_to(prof):
    page = prof.get(SETTINGS)
    text = text_of(page)
    assert page.status_code == 200
    assert "All times are UTC" in text and "Opens (UTC)" in text and "Due (UTC)" in text
    assert "blank: the rubric's deadline (2026-12-18 23:59 UTC)" in text
    assert "Grace (minutes) blank: the rubric's (15)" in text
    assert "Late penalty per started day (%) blank: the rubric's (10)" in text
    assert "Your best submission counts." in text and "10 attempts per day, plus a student's extra attempts." in text
    html = page.get_data(as_text=True)
    assert html.count('type="datetime-local"') == 3, "opens, due and an extension's date"


def test_saving_the_settings_changes_what_students_are_told(web_app, prof, course):
    r = post(prof, SETTINGS, {**FORM, "title": "Capstone 2", "due_at": "2099-12-20T23:59", "grace_minutes": "5",
                              "late_per_day": "20", "late_max": "60", "attempts": "3", "period": "week",
                              "counts": "chosen"})
    assert r.status_code == 303, text_of(r)[:600]
    assert "Saved the settings of cap." in text_of(prof.get(r.location))
    state, _, due, own, _, r_ = stored(web_app)
    assert due == datetime(2099, 12, 20, 23, 59), "the input is UTC, stored as naive UTC"
    assert own == {"grace_minutes": 5.0, "late_penalty_per_day": 0.2, "late_penalty_max": 0.6,
                   "attempts_per_period": 3, "period": "week", "counts": "chosen"}
    assert (r_.late_per_day, r_.attempts, r_.counts) == (0.2, 3, "chosen")
    form = prof.get(SETTINGS).get_data(as_text=True)
    assert 'name="late_per_day" value="20"' in form and 'name="due_at" value="2099-12-20T23:59"' in form, \
        "the form shows what is stored, percents as percents"
    student = web_app.test_client()
    web_app.config["ENFORCE_ATTEMPTS"] = True
    sign_in_student(student, "alice", course.alice)
    card = rules_of(student.get("/submit"))
    assert "Due Sunday 20 Dec 2099 23:59 UTC" in card and "3 of 3 attempts left this week." in card
    assert "The submission you choose counts" in card
    assert "Late uploads lose 20% of their score per started day late (after 5 minutes of grace), at most 60%." in card
    r = post(prof, SETTINGS, {**FORM})
    assert r.status_code == 303 and stored(web_app)[3] == {}, "blank fields give the rubric's rules back"


@pytest.mark.parametrize("fields, field, message", [
    (dict(grace_minutes="soon"), "grace_minutes", "'soon' is not a number"),
    (dict(late_per_day="150"), "late_per_day", "a percentage from 0 to 100"),
    (dict(attempts="2.5"), "attempts", "a whole number, 0 or more (0 = unlimited)"),
    (dict(due_at="next friday"), "due_at", "'next friday' is not a date and time such as 2026-12-18T23:59 (UTC)"),
    (dict(opens_at="2099-12-21T00:00", due_at="2099-12-20T23:59"), "due_at", "the due date must be after the opening"),
    (dict(state="hidden"), "state", "choose one of draft, open, closed, archived"),
    (dict(counts="worst"), "counts", "choose one of best, latest, chosen"),
], ids=["grace", "percent", "attempts", "date", "order", "state", "counts"])
def test_bad_settings_are_refused_with_what_was_typed_kept(web_app, prof, fields, field, message):
    before = stored(web_app)[:5]
    r = post(prof, SETTINGS, {**FORM, "title": "Typed title", "late_max": "40", **fields})
    text, html = text_of(r), r.get_data(as_text=True)
    assert r.status_code == 422, f"expected the form again, got {r.status_code}"
    assert "Nothing was saved" in text and message in text, text[:1500]
    assert f'id="{field}-error"' in html and 'aria-invalid="true"' in html, "the message sits at its field"
    assert 'value="Typed title"' in html and 'name="late_max" value="40"' in html, "what was typed is kept"
    assert stored(web_app)[:5] == before, "nothing is stored"


def test_a_rubric_upload_is_pinned_and_a_bad_one_names_each_problem_with_its_line(web_app, prof):
    bad = RUBRIC_TEXT.replace("late_penalty_per_day = 0.10", "late_penalty_per_day = 2").replace(
        "weight = 15", 'weight = "x"', 1)
    r = post(prof, "/instructor/assignments/cap/rubric", {}, {"rubric": (bad.encode(), "bad.toml")})
    text = text_of(r)
    assert r.status_code == 422 and "The rubric was not used" in text
    assert 'bad.toml, line 14: "late_penalty_per_day" must be a fraction from 0 to 1 (0.1 = 10%), not 2' in text, text
    assert "bad.toml, line 20, category \"specification\": \"weight\" must be a number" in text
    assert stored(web_app)[4] is None, "still the packaged rubric"
    mine = RUBRIC_TEXT.replace('version = "2026-11-29.1"', 'version = "2026-12-02.course"').replace(
        'counts = "best"', 'counts = "last"')
    r = post(prof, "/instructor/assignments/cap/rubric", {}, {"rubric": (mine.encode(), "course.toml")})
    assert r.status_code == 303, text_of(r)[:800]
    page = text_of(prof.get(r.location))
    assert "cap is now scored by course.toml." in page and "Scored by rubric 2026-12-02.course (course.toml)" in page
    assert "Your latest submission counts." in page, "the pinned rubric's policy ('last' means latest)"
    r = post(prof, "/instructor/assignments/cap/rubric", {"packaged": "1"})
    assert r.status_code == 303 and stored(web_app)[4] is None
    r = post(prof, "/instructor/assignments/cap/rubric", {}, {"rubric": (b"\xff\xfe", "x.toml")})
    assert r.status_code == 422 and "x.toml is not UTF-8 text." in text_of(r)


def test_extensions_are_given_listed_and_removed(web_app, prof, course):
    r = post(prof, "/instructor/assignments/cap/extensions",
             {"student": "alice", "until": "2099-01-05T12:00", "extra_attempts": "2", "reason": "medical certificate"})
    assert r.status_code == 303, text_of(r)[:800]
    text = text_of(prof.get(r.location))
    assert "alice has an extension on cap." in text
    assert "alice 2099-01-05 12:00 UTC 2 medical certificate Remove" in text
    student = web_app.test_client()
    web_app.config["ENFORCE_ATTEMPTS"] = True
    sign_in_student(student, "alice", course.alice)
    card = rules_of(student.get("/submit"))
    assert "Extended for you to Monday 5 Jan 2099 12:00 UTC" in card and "12 of 12 attempts left today." in card
    r = post(prof, "/instructor/assignments/cap/extensions/alice/remove", {})
    assert r.status_code == 303
    text = text_of(prof.get(r.location))
    assert "alice's extension on cap is removed" in text and "No extensions yet." in text
    assert "Extended for you" not in rules_of(student.get("/submit"))
    assert post(prof, "/instructor/assignments/cap/extensions/alice/remove", {}).status_code == 404, \
        "no extension left to remove"


@pytest.mark.parametrize("fields, field, message", [
    (dict(student="", until="2099-01-05T12:00"), "student", "choose a student on the roster"),
    (dict(student="alice"), "until", "give a new due date, extra attempts, or both"),
    (dict(student="alice", until="tomorrow"), "until", "'tomorrow' is not a date and time"),
    (dict(student="alice", extra_attempts="-1"), "extra_attempts", "a whole number, 0 or more"),
], ids=["no-student", "nothing", "bad-date", "negative"])
def test_a_bad_extension_is_refused_with_what_was_typed_kept(web_app, prof, fields, field, message):
    r = post(prof, "/instructor/assignments/cap/extensions", {"reason": "typed reason", **fields})
    text, html = text_of(r), r.get_data(as_text=True)
    assert r.status_code == 422 and "No extension was given" in text and message in text, text[:1500]
    assert f'id="{field}-error"' in html and 'value="typed reason"' in html
    assert "No extensions yet." in text


def test_a_new_assignment_starts_as_a_draft_students_cannot_see(web_app, prof, course):
    r = post(prof, "/instructor/assignments/new", {"slug": "bad slug!", "title": "Week 2"})
    assert r.status_code == 422 and "Slug must be 1-64 letters, digits, '-' or '_'." in text_of(r)
    assert 'value="Week 2"' in r.get_data(as_text=True)
    r = post(prof, "/instructor/assignments/new", {"slug": "week2", "title": "Week 2", "state": "draft"})
    assert r.status_code == 303 and r.location == "/instructor/assignments/week2/settings"
    assert stored(web_app, "week2")[0] == "draft"
    assert "Settings & extensions" in text_of(prof.get("/instructor/")), "the dashboard links each one's settings"
    student = web_app.test_client()
    sign_in_student(student, "alice", course.alice)
    assert "Week 2" not in text_of(student.get("/submit"))


def test_the_settings_pages_are_for_signed_in_instructors_with_the_form_token(web_app, client, course, prof):
    assert prof.post(SETTINGS, data=FORM).status_code == 400, "no CSRF token"
    other = web_app.test_client()
    sign_in_student(other, "alice", course.alice)
    r = other.get(SETTINGS)
    assert r.status_code == 302 and "/instructor/signin" in r.location
    assert prof.get("/instructor/assignments/nope/settings").status_code == 404


def test_the_last_attempt_is_counted_down_and_then_refused_with_when_again(web_app, alice):
    settle(web_app, attempts_per_period=2, period="day")
    upload(alice)
    assert "1 of 2 attempts left today." in rules_of(alice.get("/submit"))
    upload(alice, module=upload.__defaults__[0] + b"# two\n")
    card = rules_of(alice.get("/submit"))
    assert re.search(r"You have used all 2 attempts today; you can submit again from \w+ \d+ \w+ 00:00 UTC\.", card), \
        card
    r = upload(alice, module=upload.__defaults__[0] + b"# three\n")
    assert r.status_code == 429
    assert "You have used all 2 submissions allowed per day on 'cap'; you can submit again from" in text_of(r)


def test_the_api_says_the_rules_in_the_submit_pages_words(web_app, alice, course):
    settle(web_app, due_at=iso(-timedelta(days=1, hours=3)), late_penalty_per_day=0.1, attempts_per_period=4)
    upload(alice)
    api = web_app.test_client()
    d = api.get("/api/v1/assignments/cap", headers={"Authorization": f"Bearer {course.alice}"}).get_json()
    card = rules_of(alice.get("/submit"))
    assert d["in_words"] and all(line in card for line in d["in_words"]), (d["in_words"], card)
    assert "3 of 4 attempts left today." in d["in_words"]
    assert d["late_notice"] == "This upload is 2 days late: it loses 20% of its score."
    assert d["late_fraction_now"] == 0.2
    prof = api.get("/api/v1/assignments/cap", headers={"Authorization": f"Bearer {course.instructor}"}).get_json()
    assert prof["in_words"][0].startswith("Was due ") and "late_notice" not in prof


def test_an_archived_assignment_leaves_the_dashboard_but_its_settings_stay_reachable(web_app, prof):
    r = post(prof, SETTINGS, {**FORM, "state": "archived"})
    assert r.status_code == 303 and stored(web_app)[0] == "archived"
    assert "Settings & extensions of cap" not in prof.get("/instructor/").get_data(as_text=True).replace("&amp;", "&")
    page = prof.get("/instructor/assignments")
    assert "Capstone (cap) archived" in text_of(page)
    assert 'href="/instructor/assignments/cap/settings"' in page.get_data(as_text=True)
    assert 'href="/instructor/assignments"' in prof.get("/instructor/").get_data(as_text=True)
