"""Issue 15's web attacks: forged cookies, sign-in lockout, hostile file names, parser bombs, bad paging."""
import io
import time

import pytest

from .web_helpers import REFERENCE, csrf, grade_now, graded_report, sign_in_instructor, sign_in_student, text_of, upload


def client_at(app, address: str):
    """A browser at `address` (the throttle counts per client address)."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


def forged_cookie(secret: str, data: dict) -> str:
    """A session cookie as Flask would sign it with `secret`."""
    from flask import Flask
    from flask.sessions import SecureCookieSessionInterface
    forger = Flask("forger")
    forger.secret_key = secret
    return SecureCookieSessionInterface().get_signing_serializer(forger).dumps(data)


# ---------------------------------------------------------------- the published "dev" key opens nothing

def test_a_cookie_signed_with_dev_opens_no_student_page(web_app, course):
    from grader.app.db import get_db
    from grader.app.models import Student, Token
    with web_app.app_context(), get_db(web_app).session() as s:
        alice = s.query(Student).filter_by(username="alice").one()
        token_id = s.query(Token).filter_by(student_id=alice.id).first().id
    who = {"who": {"role": "student", "student_id": alice.id, "username": "alice", "token_id": token_id,
                   "name": "Alice"}, "_csrf": "x"}
    for secret, opens in ((web_app.config["SECRET_KEY"], True), ("dev", False)):
        client = web_app.test_client()
        client.set_cookie("session", forged_cookie(secret, who))
        r = client.get("/submit")
        assert (r.status_code == 200) is opens, (
            f"a cookie signed with {'the app key' if opens else 'dev'} should {'' if opens else 'not '}open "
            f"alice's page (got {r.status_code})")


def test_a_cookie_signed_with_dev_cannot_regrade(web_app, course):
    from grader.app.db import get_db
    from grader.app.models import Submission
    from grader.app.models import Instructor
    student = web_app.test_client()
    sign_in_student(student, "alice", course.alice)
    upload(student, REFERENCE)
    grade_now(web_app, 1, graded_report())
    with web_app.app_context(), get_db(web_app).session() as s:
        prof_id = s.query(Instructor).filter_by(username="prof").one().id
    client = web_app.test_client()
    client.set_cookie("session", forged_cookie("dev", {"who": {"role": "instructor", "id": prof_id,
                                                               "username": "prof", "name": "Prof"}, "_csrf": "x"}))
    r = client.post("/instructor/submissions/1/regrade", data={"csrf_token": "x"})
    assert r.status_code in (302, 303, 400) and "/regrade" not in (r.location or ""), r.status_code
    with web_app.app_context(), get_db(web_app).session() as s:
        sub = s.get(Submission, 1)
        assert (sub.status, sub.request) == ("done", 1), "a forged instructor cookie must not queue a regrade"
    assert client.get("/instructor/").status_code == 302, "nor open the dashboard"


def test_the_placeholder_key_is_refused_even_in_a_test_config(tmp_path, monkeypatch):
    from grader.app import create_app
    from grader.app.instance import InsecureInstance
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    with pytest.raises(InsecureInstance, match="placeholder 'dev'"):
        create_app({"DATABASE_URL": f"sqlite:///{tmp_path}/g.sqlite", "BROKER_URL": "memory://", "SECRET_KEY": "dev"})


# ---------------------------------------------------------------- sign-in: nobody can lock anyone else out

def test_fifty_wrong_tokens_do_not_lock_the_student_out(web_app, course):
    web_app.config.update(WEB_SIGNIN_LIMIT=10, WEB_SIGNIN_BACKOFF_S=60, WEB_SIGNIN_WINDOW_S=300)
    attacker = client_at(web_app, "10.0.0.66")
    codes = [sign_in_student(attacker, "alice", f"gr_guess{n}").status_code for n in range(50)]
    assert codes[:10] == [401] * 10 and set(codes[10:]) == {429}, codes
    assert sign_in_student(client_at(web_app, "10.0.0.7"), "alice", course.alice).status_code == 303, \
        "alice with her right token from another address must sign in while her roster id is hammered"
    # Our choice: a token (256 random bits) is checked even from the hammering address, so the right one works there
    # at once; wrong ones keep being refused.
    assert sign_in_student(attacker, "alice", course.alice).status_code == 303, "the right token always works"
    r = sign_in_student(client_at(web_app, "10.0.0.66"), "alice", "gr_guess51")
    assert r.status_code == 429 and "Too many failed sign-ins from your address" in text_of(r)
    assert r.headers["Retry-After"].isdigit()


def test_a_wrong_token_from_a_fresh_address_waits_while_the_account_is_hammered(web_app, course):
    web_app.config.update(WEB_SIGNIN_LIMIT=3, WEB_SIGNIN_BACKOFF_S=60, WEB_SIGNIN_WINDOW_S=300)
    for n in range(3):  # three addresses, one failure each: the account's count, not any address's
        assert sign_in_student(client_at(web_app, f"10.0.1.{n}"), "alice", "gr_guess").status_code == 401
    r = sign_in_student(client_at(web_app, "10.0.1.9"), "alice", "gr_guess")
    assert r.status_code == 429 and "Too many failed sign-ins for this roster id" in text_of(r)
    assert sign_in_student(client_at(web_app, "10.0.1.9"), "bob", course.bob).status_code == 303, \
        "other roster ids are not affected"


def test_the_address_backoff_doubles_and_then_lets_the_instructor_in(web_app, course):
    web_app.config.update(WEB_SIGNIN_LIMIT=2, WEB_SIGNIN_BACKOFF_S=0.5, WEB_SIGNIN_WINDOW_S=300)
    guesser = client_at(web_app, "10.0.2.1")
    assert [sign_in_instructor(guesser, password="wrong").status_code for _ in range(2)] == [401, 401]
    r = sign_in_instructor(guesser)
    assert r.status_code == 429, "a password can be guessed: from the failing address nothing is checked in the wait"
    assert sign_in_instructor(client_at(web_app, "10.0.2.2")).status_code == 303, \
        "the instructor signs in from another address at once"
    time.sleep(0.6)
    assert sign_in_instructor(guesser, password="wrong").status_code == 401, "checked again once the wait is over"
    r = sign_in_instructor(guesser)
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1, "one more failure: the wait doubled to 1 s"
    time.sleep(1.1)
    assert sign_in_instructor(guesser).status_code == 303, "after the backoff the right password works from there"


def test_a_very_long_username_is_a_wrong_sign_in_not_a_crash(web_app, course):
    r = sign_in_student(web_app.test_client(), "a" * 5000, "gr_guess")
    assert r.status_code == 401, r.status_code


def test_on_postgresql_too_the_throttle_fits_its_keys_and_never_locks_out(pg_url, tmp_path, monkeypatch):
    """PostgreSQL enforces rate_events.key's 128 characters (SQLite does not): long names are hashed to fit."""
    from grader.app.db import get_db
    from tests.service.svc_helpers import empty_tables, make_app, make_course
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    app = make_app(pg_url, tmp_path, ENFORCE_ATTEMPTS=False, WEB_SIGNIN_LIMIT=5, WEB_SIGNIN_BACKOFF_S=60)
    try:
        empty_tables(app)
        course = make_course(app)
        attacker = client_at(app, f"10.9.{time.time_ns() % 250}.1")  # rate events outlive the emptied tables
        assert sign_in_student(attacker, "b" * 5000, "gr_guess").status_code == 401
        codes = [sign_in_student(attacker, "alice", "gr_guess").status_code for _ in range(8)]
        assert 429 in codes and 500 not in codes, codes
        assert sign_in_student(client_at(app, "10.9.255.2"), "alice", course.alice).status_code == 303
    finally:
        get_db(app).engine.dispose()


# ---------------------------------------------------------------- file names

NASTY_NAMES = [
    ("evil\r\nSet-Cookie: x=1.py", "evilSet-Cookie: x=1.py"),
    ('my "best" try.py', 'my "best" try.py'),
    ("../../etc/passwd.py", "passwd.py"),
    ("C:\\Users\\me\\model.py", "model.py"),
    ("réseau\u202egnp.py", "réseaugnp.py"),
]


@pytest.mark.parametrize("sent, stored", NASTY_NAMES, ids=["crlf", "quote", "path", "windows", "bidi"])
def test_a_nasty_filename_is_stored_clean_and_downloads(web_app, course, sent, stored):
    from urllib.parse import quote
    from grader.app.db import get_db
    from grader.app.models import Submission
    api = web_app.test_client()  # the raw-body upload: ?filename= carries any character, CR/LF included
    r = api.post(f"/api/v1/assignments/cap/submissions?filename={quote(sent, safe='')}", data=REFERENCE,
                 headers={**course.auth(course.alice), "Content-Type": "text/x-python"})
    assert r.status_code == 202, r.get_json()
    sub_id = r.get_json()["id"]
    with web_app.app_context(), get_db(web_app).session() as s:
        assert s.get(Submission, sub_id).filename == stored
    student, prof = web_app.test_client(), web_app.test_client()
    sign_in_student(student, "alice", course.alice)
    sign_in_instructor(prof)
    for client, path, headers in ((api, f"/api/v1/submissions/{sub_id}/file", course.auth(course.alice)),
                                  (student, f"/submissions/{sub_id}/file", {}),
                                  (prof, f"/instructor/submissions/{sub_id}/file", {})):
        r = client.get(path, headers=headers)
        assert r.status_code == 200, f"{path} answered {r.status_code}"
        cd = r.headers["Content-Disposition"]
        assert "\r" not in cd and "\n" not in cd
        assert f"filename*=UTF-8''{quote(stored, safe='')}" in cd, cd
        fallback = cd.split('filename="', 1)[1].rsplit('"; filename*=', 1)[0]
        assert fallback.replace('\\\\', '').replace('\\"', '') .count('"') == 0, f"unescaped quote in {cd}"
        assert r.data == REFERENCE


def test_an_old_row_with_crlf_in_its_name_still_downloads(web_app, course):
    """Rows stored before names were cleaned: the header is built from a cleaned name, never a 500."""
    from grader.app.db import get_db
    from grader.app.models import Submission
    api = web_app.test_client()
    r = api.post("/api/v1/assignments/cap/submissions?filename=a.py", data=REFERENCE,
                 headers={**course.auth(course.alice), "Content-Type": "text/x-python"})
    sub_id = r.get_json()["id"]
    with web_app.app_context(), get_db(web_app).session() as s:
        s.get(Submission, sub_id).filename = 'x"\r\ny.py'
        s.commit()
    r = api.get(f"/api/v1/submissions/{sub_id}/file", headers=course.auth(course.alice))
    assert r.status_code == 200 and r.headers["Content-Disposition"].startswith('attachment; filename="x\\"y.py"')


def test_a_report_name_with_crlf_downloads(web_app, course):
    from grader.app.db import get_db
    from grader.app.models import Report
    student, prof = web_app.test_client(), web_app.test_client()
    sign_in_student(student, "alice", course.alice)
    assert upload(student, REFERENCE, "m.py", report=(b"# Report\n", "rep.md")).status_code == 303
    with web_app.app_context(), get_db(web_app).session() as s:  # as a name the browser could not send
        s.query(Report).one().filename = 'r"e\r\np.md'
        s.commit()
    sign_in_instructor(prof)
    r = prof.get("/instructor/submissions/1/report?download=1")
    assert r.status_code == 200 and "filename*=UTF-8''r%22ep.md" in r.headers["Content-Disposition"], r.headers
    assert r.headers["Content-Disposition"].startswith('attachment; filename="r\\"ep.md"')


def test_clean_filename_keeps_names_and_drops_what_breaks_headers_or_paths():
    from grader.app.files import clean_filename
    assert clean_filename("model.py", "d") == "model.py"
    assert clean_filename("a\x00b\tc\x1b.py", "d") == "abc.py"
    assert clean_filename("..", "d") == "d" and clean_filename("dir/", "d") == "d" and clean_filename(None, "d") == "d"
    assert len(clean_filename("x" * 1000 + ".py", "d")) == 255 and clean_filename("x" * 1000 + ".py", "d").endswith(".py")


# ---------------------------------------------------------------- parser failures are the student's, never a 500

BOMBS = {
    "parentheses": b'TRACK = "lm"\nx = ' + b"(" * 100000 + b")" * 100000,  # SyntaxError: too many nested parentheses
    "unary-minus": b'TRACK = "lm"\nx = ' + b"-" * 100000 + b"1",  # MemoryError in 3.11's parser
    "long-sum": b'TRACK = "lm"\nx = 1' + b"+1" * 80000,  # RecursionError during ast construction
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_parser_bomb_is_a_422_with_the_reason(web_app, course, name):
    data = BOMBS[name][:256 * 1024]
    r = web_app.test_client().post("/api/v1/assignments/cap/submissions?filename=bomb.py", data=data,
                                   headers={**course.auth(course.alice), "Content-Type": "text/x-python"})
    assert r.status_code == 422, (r.status_code, r.get_data(as_text=True)[:300])
    assert "nested" in r.get_json()["message"], r.get_json()
    student = web_app.test_client()
    sign_in_student(student, "alice", course.alice)
    r = upload(student, data, "bomb.py")
    assert r.status_code == 422 and "nested" in text_of(r), r.status_code


# ---------------------------------------------------------------- paging parameters

@pytest.mark.parametrize("query, message", [
    ("limit=-1", "limit must be between 0 and"),
    ("offset=-5", "offset must be between 0 and"),
    ("limit=abc", "limit must be a whole number"),
    ("offset=1.5", "offset must be a whole number"),
    ("offset=99999999999999999999999", "offset must be between 0 and"),
])
def test_bad_paging_is_a_400_naming_the_parameter(web_app, course, query, message):
    r = web_app.test_client().get(f"/api/v1/assignments/cap/submissions?{query}", headers=course.auth(course.instructor))
    assert r.status_code == 400 and message in r.get_json()["message"], (r.status_code, r.get_json())


def test_good_paging_still_pages(web_app, course):
    api = web_app.test_client()
    for n in range(3):
        api.post("/api/v1/assignments/cap/submissions?filename=a.py", data=REFERENCE + f"# {n}\n".encode(),
                 headers={**course.auth(course.alice), "Content-Type": "text/x-python"})
    r = api.get("/api/v1/assignments/cap/submissions?limit=1&offset=1", headers=course.auth(course.instructor))
    assert r.status_code == 200 and len(r.get_json()) == 1
