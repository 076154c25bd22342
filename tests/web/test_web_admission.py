"""Turns in a web process (grader/app/admission.py): uploads wait for one another without holding a request turn,
so a status poll goes on meanwhile; a request's body is read before its turn, so a slow sender holds no turn; no
more requests run at once than asked; a failing request gives its turn back.

The app's URL map is the real one (the web_app fixture, on PostgreSQL); behind the Admission, a stand-in app holds
each request until the test lets it go, so what runs at once can be seen."""
import io
import threading
from urllib.parse import parse_qs

import pytest
from werkzeug.test import EnvironBuilder

from grader.app.admission import BODILESS, Admission

UPLOAD = "/api/v1/assignments/cap/submissions"
POLL = "/api/v1/submissions/1"
WAIT_S = 10


def environ(method: str, path: str, name: str, body: bytes = b"") -> dict:
    return EnvironBuilder(method=method, path=path, query_string={"name": name}, data=body).get_environ()


class SlowBody(io.BytesIO):
    """A request body whose sender stalls until the test lets it go on."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.sent, self.reading = threading.Event(), threading.Event()

    def read(self, size=-1):
        self.reading.set()
        assert self.sent.wait(WAIT_S), "the body was never sent"
        return super().read(size)


class Held:
    """The app behind the Admission: each request enters, then waits until released by its name."""

    def __init__(self, fail: set = frozenset()):
        self.lock, self.inside, self.most, self.fail = threading.Lock(), set(), 0, set(fail)
        self.entered, self.go, self.bodies, self.streams = {}, {}, {}, {}

    def event(self, table: dict, name: str) -> threading.Event:
        with self.lock:
            return table.setdefault(name, threading.Event())

    def __call__(self, environ, start_response):
        name = parse_qs(environ["QUERY_STRING"])["name"][0]
        self.streams[name] = environ["wsgi.input"]
        self.bodies[name] = environ["wsgi.input"].read()
        with self.lock:
            self.inside.add(name)
            self.most = max(self.most, len(self.inside))
        self.event(self.entered, name).set()
        try:
            if name in self.fail:
                raise RuntimeError("the view failed")
            assert self.event(self.go, name).wait(WAIT_S), f"{name} was never released"
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [name.encode()]
        finally:
            with self.lock:
                self.inside.discard(name)

    def release(self, name: str) -> None:
        self.event(self.go, name).set()

    def has_entered(self, name: str, within: float = WAIT_S) -> bool:
        return self.event(self.entered, name).wait(within)


def send(admission: Admission, method: str, path: str, name: str, results: dict, body=None) -> threading.Thread:
    """The request in a thread of its own, as gunicorn's would; its outcome in results[name]."""
    env = environ(method, path, name, b"x" * 100)
    if body is not None:
        env["wsgi.input"], env["CONTENT_LENGTH"] = body, str(len(body.getvalue()))

    def run():
        try:
            results[name] = b"".join(admission(env, lambda *a: None))
        except Exception as exc:  # the stand-in's failure, seen by the test
            results[name] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def held(web_app):
    """(an Admission running 4 writes at once, uploads one at a time, around a Held stand-in; the stand-in)."""
    admission = Admission(web_app, writes=4)
    admission.inner = stand_in = Held()
    return admission, stand_in


def test_uploads_are_told_apart_by_the_apps_own_routes(web_app):
    admission = Admission(web_app, writes=4)

    def turns(path: str, name: str):
        return admission.turns(admission.endpoint(environ("POST", path, name)))
    assert turns(UPLOAD, "api") is admission.uploads
    assert turns("/submit", "form") is admission.uploads
    assert turns("/api/v1/submissions/1/regrade", "regrade") is admission.writes
    assert turns("/no/such/page", "missing") is admission.writes
    assert {"GET", "HEAD", "OPTIONS"} <= BODILESS  # reads, the form's page and polls among them, take no turn


def test_a_poll_runs_while_uploads_wait_for_their_turn(held):
    admission, app = held
    results = {}
    first = send(admission, "POST", UPLOAD, "upload 1", results)
    assert app.has_entered("upload 1")
    second = send(admission, "POST", UPLOAD, "upload 2", results)
    poll = send(admission, "GET", POLL, "poll", results)
    assert app.has_entered("poll"), "the poll waited behind the uploads"
    app.release("poll")
    poll.join(WAIT_S)
    assert results["poll"] == b"poll"
    assert not app.has_entered("upload 2", within=0.3), "two uploads ran at once"
    app.release("upload 1")
    first.join(WAIT_S)
    assert app.has_entered("upload 2"), "the second upload never got its turn"
    app.release("upload 2")
    second.join(WAIT_S)
    assert results == {"poll": b"poll", "upload 1": b"upload 1", "upload 2": b"upload 2"}


def test_a_slow_sender_holds_no_upload_turn(held):
    admission, app = held
    results, body = {}, SlowBody(b"the module, slowly" * 100)
    slow = send(admission, "POST", UPLOAD, "slow", results, body=body)
    assert body.reading.wait(WAIT_S)
    quick = send(admission, "POST", UPLOAD, "quick", results)
    assert app.has_entered("quick"), "an upload waited for a slow sender's body"
    app.release("quick")
    quick.join(WAIT_S)
    assert not app.has_entered("slow", within=0.1)
    body.sent.set()
    assert app.has_entered("slow")
    app.release("slow")
    slow.join(WAIT_S)
    assert results == {"quick": b"quick", "slow": b"slow"}
    assert app.bodies == {"quick": b"x" * 100, "slow": b"the module, slowly" * 100}
    assert app.streams["slow"] is not body  # read ahead, into memory


def test_a_slow_form_post_holds_no_turn(web_app):
    admission = Admission(web_app, writes=1)
    admission.inner = app = Held()
    results, body = {}, SlowBody(b"username=ab&password=cd")
    slow = send(admission, "POST", "/signin", "slow", results, body=body)
    assert body.reading.wait(WAIT_S)
    quick = send(admission, "POST", "/signin", "quick", results)
    assert app.has_entered("quick"), "the only turn waited for a slow sender's form"
    app.release("quick")
    quick.join(WAIT_S)
    body.sent.set()
    assert app.has_entered("slow")
    app.release("slow")
    slow.join(WAIT_S)
    assert results == {"quick": b"quick", "slow": b"slow"}
    assert app.bodies["slow"] == b"username=ab&password=cd"


def test_a_body_longer_than_the_limit_is_left_for_the_app_to_refuse(held):
    admission, app = held
    results, limit = {}, admission.flask_app.config["MAX_CONTENT_LENGTH"]
    body = io.BytesIO(b"x" * (limit + 1))
    big = send(admission, "POST", UPLOAD, "big", results, body=body)
    assert app.has_entered("big")
    app.release("big")
    big.join(WAIT_S)
    assert app.streams["big"] is body and app.bodies["big"] == b"x" * (limit + 1)  # the sender's stream, unread


def test_no_more_writes_run_at_once_than_asked_and_in_the_order_they_came(web_app):
    admission = Admission(web_app, writes=2)
    admission.inner = app = Held()
    results, names, threads = {}, [f"regrade {k}" for k in range(5)], []
    for name in names:  # one after the other, so the order they came in is known
        threads.append(send(admission, "POST", "/api/v1/submissions/1/regrade", name, results))
        assert app.has_entered(name, within=0.3) == (name in names[:2])
    assert app.most == 2, "a third write ran"
    for k, name in enumerate(names):
        app.release(name)
        if k + 2 < len(names):
            assert app.has_entered(names[k + 2]), f"{names[k + 2]} did not get the turn {name} gave back"
            assert not any(app.has_entered(n, within=0.05) for n in names[k + 3:]), "a later write went first"
    for thread in threads:
        thread.join(WAIT_S)
    assert results == {name: name.encode() for name in names}
    assert app.most == 2


def test_reads_take_no_turn(web_app):
    admission = Admission(web_app, writes=1)
    admission.inner = app = Held()
    results = {}
    write = send(admission, "POST", "/api/v1/submissions/1/regrade", "write", results)
    assert app.has_entered("write")
    polls = [send(admission, "GET", POLL, f"poll {k}", results) for k in range(3)]
    assert all(app.has_entered(f"poll {k}") for k in range(3)), "a read waited for a turn"
    for name in ("poll 0", "poll 1", "poll 2", "write"):
        app.release(name)
    for thread in (*polls, write):
        thread.join(WAIT_S)
    assert app.most == 4


def test_a_failing_request_gives_its_turn_back(web_app):
    admission = Admission(web_app, writes=1)
    admission.inner = app = Held(fail={"upload 1", "regrade 1"})
    results = {}
    for name, path in (("upload 1", UPLOAD), ("regrade 1", "/api/v1/submissions/1/regrade")):
        send(admission, "POST", path, name, results).join(WAIT_S)
        assert isinstance(results[name], RuntimeError)
    for method, path, name in (("POST", UPLOAD, "upload 2"), ("POST", "/api/v1/submissions/1/regrade", "regrade 2")):
        thread = send(admission, method, path, name, results)
        assert app.has_entered(name), f"{name} found no turn after a request failed"
        app.release(name)
        thread.join(WAIT_S)
        assert results[name] == name.encode()
