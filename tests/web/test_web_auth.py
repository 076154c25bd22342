"""Signing in: students with roster id and token, instructors with a hashed password; sessions follow revocation."""
import pytest
from sqlalchemy import select

from .web_helpers import PASSWORD, csrf, sign_in_instructor, sign_in_student, text_of


def test_a_student_signs_in_with_roster_id_and_token(client, course):
    r = sign_in_student(client, "alice", course.alice)
    assert r.status_code == 303 and r.location.endswith("/submit"), r.location
    page = client.get("/submit")
    assert page.status_code == 200 and "Alice (student)" in text_of(page)


@pytest.mark.parametrize("username, token, why", [
    ("alice", "gr_not-a-token", "an unknown token"),
    ("alice", "BOB", "bob's token under alice's roster id"),
    ("alice", "INSTRUCTOR", "an instructor token is not a student sign-in"),
    ("nobody", "ALICE", "a roster id the token does not belong to"),
])
def test_a_wrong_pair_is_refused(client, course, username, token, why):
    token = {"BOB": course.bob, "ALICE": course.alice, "INSTRUCTOR": course.instructor}.get(token, token)
    r = sign_in_student(client, username, token)
    assert r.status_code == 401, f"{why} must not sign in"
    assert "do not match an active student token" in text_of(r)
    assert client.get("/submit").status_code == 302, "still signed out"


def test_a_revoked_token_ends_the_students_session(web_app, client, course):
    from grader.app.accounts import revoke_token
    from grader.app.db import get_db
    from grader.app.models import Student, Token
    sign_in_student(client, "alice", course.alice)
    assert client.get("/submit").status_code == 200
    with web_app.app_context(), get_db(web_app).session() as s:
        alice = s.scalar(select(Student).where(Student.username == "alice"))
        for t in s.scalars(select(Token).where(Token.student_id == alice.id)):
            revoke_token(s, t.id)
    r = client.get("/submit")
    assert r.status_code == 302 and "/signin" in r.location, "a revoked token must sign the browser out"


def test_instructor_passwords_are_stored_hashed_and_checked(web_app, client, course):
    from grader.app.db import get_db
    from grader.app.models import Instructor
    with web_app.app_context(), get_db(web_app).session() as s:
        row = s.scalar(select(Instructor).where(Instructor.username == "prof"))
        assert PASSWORD not in row.password_hash and row.password_hash.startswith(("scrypt:", "pbkdf2:")), \
            "the password must be kept only as a salted hash"
    assert sign_in_instructor(client, "prof", "wrong password!!").status_code == 401
    assert sign_in_instructor(client, "ghost", PASSWORD).status_code == 401
    r = sign_in_instructor(client)
    assert r.status_code == 303 and r.location.endswith("/instructor/")
    assert "All submissions" in text_of(client.get("/instructor/"))


@pytest.mark.parametrize("path", ["/instructor/", "/instructor/roster", "/instructor/submissions/1",
                                  "/instructor/assignments/cap", "/instructor/assignments/cap/export.csv"])
def test_instructor_pages_need_an_instructor(client, course, path):
    assert "/instructor/signin" in client.get(path).location, f"{path} open without signing in"
    sign_in_student(client, "alice", course.alice)
    r = client.get(path)
    assert r.status_code == 302 and "/instructor/signin" in r.location, f"a student opened {path}"


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil.example"])
def test_sign_in_never_redirects_off_site(client, course, target):
    r = client.post(f"/signin?next={target}", data={"username": "alice", "token": course.alice,
                                                    "csrf_token": csrf(client)})
    assert r.status_code == 303 and r.location == "/submit", f"next={target} led to {r.location}"


def test_sign_in_keeps_a_safe_next_page(client, course):
    first = client.get("/submissions")
    assert first.status_code == 302 and "next=/submissions" in first.location
    r = client.post("/signin?next=/submissions", data={"username": "alice", "token": course.alice,
                                                       "csrf_token": csrf(client)})
    assert r.location == "/submissions"


def test_signing_out_ends_the_session(client, course):
    sign_in_student(client, "alice", course.alice)
    token = csrf(client, "/submit")
    assert client.post("/signout", data={"csrf_token": token}).status_code == 303
    assert client.get("/submit").status_code == 302


def every_table(web_app) -> dict:
    """Every row of every table, for telling whether a request changed anything."""
    from grader.app.db import get_db
    from grader.app.models import Base
    with web_app.app_context(), get_db(web_app).session() as s:
        return {t.name: sorted(map(repr, s.execute(select(t)).all())) for t in Base.metadata.sorted_tables
                if t.name != "rate_events"}  # the throttle's own bookkeeping


def instructor_forms(web_app) -> list[str]:
    """Every instructor URL that takes a POST (signing in and out aside: anyone may), its parameters filled."""
    values = {"slug": "cap", "submission_id": 1, "username": "bob", "comment_id": 1}
    paths = []
    for rule in web_app.url_map.iter_rules():
        if rule.rule.startswith("/instructor/") and "POST" in rule.methods and \
                rule.endpoint not in ("instructor.signin", "instructor.signout"):
            paths.append(rule.build({k: values[k] for k in rule.arguments})[1])
    return sorted(paths)


def test_a_signed_in_student_with_a_valid_token_posts_to_no_instructor_form(web_app, client, course):
    """The form token is the student's own and valid, so only the role check stands between them and each form."""
    from .web_helpers import grade_now, graded_report, upload
    sign_in_student(client, "alice", course.alice)
    assert upload(client).status_code in (302, 303)
    grade_now(web_app, 1, graded_report())
    token = csrf(client, "/submit")
    paths = instructor_forms(web_app)
    assert len(paths) >= 15 and "/instructor/submissions/1/regrade" in paths, paths
    form = {"csrf_token": token, "points": "0", "comment": "x", "text": "x", "level_split_heads": "hidden",
            "name": "x", "username": "mallory", "title": "x", "due": "2020-01-01T00:00"}
    before = every_table(web_app)
    for path in paths:
        r = client.post(path, data=form)
        assert r.status_code == 302 and "/instructor/signin" in r.location, f"a student's post to {path}: {r.status_code}"
    assert every_table(web_app) == before, "a student's post to an instructor form changed the database"
    # the control: the same post from the instructor does act (a regrade is a new request)
    prof = web_app.test_client()
    sign_in_instructor(prof)
    r = prof.post("/instructor/submissions/1/regrade", data={"csrf_token": csrf(prof, "/instructor/signin")})
    assert r.status_code in (302, 303), r.status_code
    assert every_table(web_app)["submissions"] != before["submissions"], "the instructor's regrade changed nothing"
