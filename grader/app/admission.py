"""Turns for the requests that carry a body: each is read first, then uploads run one at a time and other writes a
few at a time, so a burst of uploads leaves the cores' time to the status polls.

Under `grader serve` such requests have a thread pool of their own (grader/app/pools.py); reads never wait here. A
burst of uploads (each about 15 ms of CPU, a commit and the archive's fsync) run all at once took the interpreter's
lock from the polls (bench/web_load.py, 50 clients uploading, then polling: p99 0.5 s); one at a time, a poll
shares it with at most one upload. A body is read before its turn, so a client that sends slowly holds its own
thread, never a turn.
"""
import collections
import io
import threading

from werkzeug.exceptions import HTTPException

from .pages.common import report_limit

UPLOAD_ENDPOINTS = frozenset({"api.submit", "student.submit"})  # the API's upload and the web form's
BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})  # methods whose requests carry no body here: reads


class Admission:
    """WSGI middleware around a Flask app's wsgi_app: a request with a body is read, then waits for its turn, at
    most `uploads` uploads and `writes` other writes at once; a read goes straight through."""

    def __init__(self, flask_app, writes: int, uploads: int = 1):
        self.flask_app, self.inner = flask_app, flask_app.wsgi_app
        self.writes, self.uploads = Turns(writes), Turns(uploads)

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") in BODILESS:
            return self.inner(environ, start_response)
        endpoint = self.endpoint(environ)
        read_ahead(environ, report_limit(self.flask_app, endpoint) or self.flask_app.config.get("MAX_CONTENT_LENGTH"))
        with self.turns(endpoint):
            return self.inner(environ, start_response)

    def endpoint(self, environ) -> str | None:
        """The view a request goes to, by the app's own URL map (a route's path is written once); else None."""
        try:
            endpoint, _ = self.flask_app.url_map.bind_to_environ(environ).match()
        except HTTPException:  # no such route, another method, a redirect: the app answers it
            return None
        return endpoint

    def turns(self, endpoint: str | None) -> "Turns":
        """What a write to this view waits for: the uploads' turn (one at a time) or the other writes'."""
        return self.uploads if endpoint in UPLOAD_ENDPOINTS else self.writes


class Turns:
    """At most `n` holders at once, served in the order they asked: a turn given back goes straight to the first
    waiter. threading.Semaphore lets a newcomer take a freed turn ahead of a woken waiter, which then waits again
    at the back of the queue: under wrk's back-to-back load that unfairness was the status p99's tail."""

    def __init__(self, n: int):
        self.lock, self.free, self.queue = threading.Lock(), n, collections.deque()

    def __enter__(self):
        with self.lock:
            if self.free and not self.queue:
                self.free -= 1
                return self
            waiter = threading.Lock()
            waiter.acquire()
            self.queue.append(waiter)
        waiter.acquire()  # released by __exit__ of the holder whose turn this is
        return self

    def __exit__(self, *exc):
        with self.lock:
            if self.queue:
                self.queue.popleft().release()  # the turn passes on without being free in between
            else:
                self.free += 1


def read_ahead(environ, limit: int | None) -> None:
    """The request's body read into memory now, at most `limit` bytes and one more (the app refuses a longer one
    with 413 as before); a body its length says is too long is left unread, for the app to refuse unread."""
    length = environ.get("CONTENT_LENGTH") or ""
    if length and not length.isdigit():
        return  # malformed: the app answers it
    if length and limit is not None and int(length) > limit:
        return
    want = int(length) if length else (limit + 1 if limit is not None else -1)
    try:
        body = environ["wsgi.input"].read(want)
    except Exception:  # the sender went away mid-body: the app sees a short body and answers 400
        body = b""
    environ["wsgi.input"] = io.BytesIO(body)


def admit(flask_app, writes: int, uploads: int = 1) -> None:
    """Put the app's requests through an Admission (the app object is still the Flask app)."""
    flask_app.wsgi_app = Admission(flask_app, writes, uploads)
