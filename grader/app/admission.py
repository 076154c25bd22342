"""Turns in a web process: a few requests run at once, and uploads one at a time, so a burst of uploads leaves
room for the status polls.

gunicorn's gthread worker hands each request it accepts to a thread. With only as many threads as should run at
once, a burst of uploads (each about 15 ms of CPU, a commit and the archive's fsync) took every thread, and the
status polls queued behind them (bench/web_load.py, 50 clients uploading, then polling: p99 0.5 s). So a process
now has more threads than it runs requests: each request waits for a turn (`running` at once), and an upload first
waits for the upload turn, holding no request turn meanwhile. A poll then waits behind at most one upload.
An upload's body is read before it waits, so a client that sends slowly holds its own thread, never a turn.
"""
import io
import threading

from werkzeug.exceptions import HTTPException

from .pages.common import report_limit

UPLOAD_ENDPOINTS = frozenset({"api.submit", "student.submit"})  # the API's upload and the web form's


class Admission:
    """WSGI middleware around a Flask app's wsgi_app: at most `running` requests in the app at once, and among
    them at most `uploads` uploads."""

    def __init__(self, flask_app, running: int, uploads: int = 1):
        self.flask_app, self.inner = flask_app, flask_app.wsgi_app
        self.running = threading.BoundedSemaphore(running)
        self.uploads = threading.BoundedSemaphore(uploads)

    def __call__(self, environ, start_response):
        endpoint = self.upload_endpoint(environ)
        if endpoint is None:
            with self.running:
                return self.inner(environ, start_response)
        read_ahead(environ, report_limit(self.flask_app, endpoint) or self.flask_app.config.get("MAX_CONTENT_LENGTH"))
        with self.uploads, self.running:
            return self.inner(environ, start_response)

    def upload_endpoint(self, environ) -> str | None:
        """The upload view a POST goes to, by the app's own URL map (a route's path is written once); else None."""
        if environ.get("REQUEST_METHOD") != "POST":
            return None
        try:
            endpoint, _ = self.flask_app.url_map.bind_to_environ(environ).match()
        except HTTPException:  # no such route, another method, a redirect: the app answers it
            return None
        return endpoint if endpoint in UPLOAD_ENDPOINTS else None

    def is_upload(self, environ) -> bool:
        return self.upload_endpoint(environ) is not None


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


def admit(flask_app, running: int, uploads: int = 1) -> None:
    """Put the app's requests through an Admission (the app object is still the Flask app)."""
    flask_app.wsgi_app = Admission(flask_app, running, uploads)
