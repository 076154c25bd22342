"""Every form post carries this session's CSRF token; without it nothing happens, and the page says why."""
import pytest

from .web_helpers import csrf, graded_report, grade_now, sign_in_instructor, sign_in_student, text_of, upload

POSTS = [  # (who signs in, path, form fields)
    (None, "/signin", {"username": "alice", "token": "ALICE"}),
    (None, "/instructor/signin", {"username": "prof", "password": "correct horse battery staple"}),
    ("alice", "/submit", {"assignment": "cap"}),
    ("alice", "/signout", {}),
    ("prof", "/instructor/submissions/1/manual", {"points_spec_contract": "5"}),
    ("prof", "/instructor/submissions/1/regrade", {}),
    ("prof", "/instructor/assignments/cap/regrade", {}),
    ("prof", "/instructor/assignments/cap/releases", {"release": "specification"}),
    ("prof", "/instructor/roster", {"text": "username\nmallory\n"}),
]


@pytest.fixture
def graded(web_app, client, course):
    """Submission 1: alice's, graded."""
    sign_in_student(client, "alice", course.alice)
    assert upload(client).status_code == 303
    grade_now(web_app, 1, graded_report())
    client.post("/signout", data={"csrf_token": csrf(client, "/submit")})
    return 1


@pytest.mark.parametrize("who, path, form", POSTS, ids=[p for _, p, _ in POSTS])
@pytest.mark.parametrize("token", ["missing", "forged"])
def test_a_post_without_the_sessions_token_is_refused(web_app, client, course, graded, who, path, form, token):
    from grader.app.db import get_db
    from grader.app.models import Submission, Student
    if who == "alice":
        sign_in_student(client, "alice", course.alice)
    elif who == "prof":
        sign_in_instructor(client)
    form = {k: course.alice if v == "ALICE" else v for k, v in form.items()}
    if token == "forged":
        form["csrf_token"] = "x" * 43
    r = client.post(path, data=form)
    assert r.status_code == 400, f"{path} without a valid CSRF token answered {r.status_code}"
    assert "This form has expired" in text_of(r) and "Traceback" not in r.get_data(as_text=True)
    with web_app.app_context(), get_db(web_app).session() as s:
        sub = s.get(Submission, 1)
        assert sub.manual is None and sub.request == 1, "a refused post changed the submission"
        assert s.query(Student).filter_by(username="mallory").count() == 0, "a refused post imported a roster"


def test_a_token_from_another_session_does_not_work(client, web_app, course):
    """The victim's session has a token of its own, so the stolen one is compared with it, not refused for lack of one."""
    own = csrf(client)
    stolen = csrf(web_app.test_client())
    assert stolen != own
    r = client.post("/signin", data={"username": "alice", "token": course.alice, "csrf_token": stolen})
    assert r.status_code == 400 and "This form has expired" in text_of(r)
    r = client.post("/signin", data={"username": "alice", "token": course.alice, "csrf_token": own})
    assert r.status_code in (302, 303), "the control: the session's own token signs in"


def test_the_session_cookie_is_http_only_and_same_site(client, course):
    r = sign_in_student(client, "alice", course.alice)
    cookie = r.headers.get("Set-Cookie", "")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie, cookie


def test_pages_send_security_headers(client, course):
    r = client.get("/signin")
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["Cache-Control"] == "no-store"
