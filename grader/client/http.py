"""A small client for the service's JSON API (/api/v1): bearer token, retries with backoff, one-line errors.

Connection errors, timeouts and 502/503/504 are retried with exponential backoff; an upload may be retried
safely because the service recognises a student's latest file sent again (200, not queued twice).
Every failure is a ClientError whose message is one line and whose exit_code is what the CLI exits with.
"""
import random
import threading
import time
from urllib.parse import quote

import requests

from .. import __version__

EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_AUTH = 1, 2, 3, 4  # 0 is success (docs/cli.md, Exit codes)
RETRY_STATUSES = (502, 503, 504)
PAGE = 1000  # the API's largest page of submissions
MAX_BACKOFF_S = 8.0


class ClientError(Exception):
    """A failed call; `message` is one line, `exit_code` what a script sees."""
    exit_code = EXIT_FAILED

    def __init__(self, message: str, status: int | None = None, code: str | None = None):
        super().__init__(message)
        self.message, self.status, self.code = message, status, code


class Unreachable(ClientError):
    """No answer from the server: refused, unknown host, timed out, or 502/503/504 after every retry."""
    exit_code = EXIT_UNREACHABLE


class AuthFailed(ClientError):
    """No token, a token the server refuses (401) or one that may not do this (403)."""
    exit_code = EXIT_AUTH


class ApiError(ClientError):
    """The server answered with an error (4xx/5xx); its own message is kept."""


class NotFound(ApiError):
    pass


def reason(exc: Exception, timeout: float) -> str:
    """A short human reason for a requests exception (its own text is a paragraph of nested reprs)."""
    text = str(exc)
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS error (" + text.split(":")[-1].strip(" ')\"") + ")"
    if isinstance(exc, requests.exceptions.Timeout):
        return f"no answer within {timeout:g} s"
    for needle, short in (("Connection refused", "connection refused"), ("Name or service not known", "unknown host"),
                          ("nodename nor servname", "unknown host"), ("Temporary failure in name resolution",
                                                                      "unknown host"),
                          ("No route to host", "no route to host"), ("Network is unreachable", "network unreachable"),
                          ("RemoteDisconnected", "the connection was closed without an answer"),
                          ("Connection reset", "connection reset")):
        if needle in text:
            return short
    return type(exc).__name__


def error_message(response: requests.Response) -> tuple[str, str | None]:
    """The API's {"error", "message"}, or the first line of whatever else came back."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"]), data.get("error")
    text = (response.text or "").strip().splitlines()
    return (text[0][:200] if text else response.reason or "no message"), None


class Client:
    """Plain methods over the API; safe to share between threads (one HTTP session per thread)."""

    def __init__(self, server: str, token: str | None, retries: int = 4, timeout: float = 60.0,
                 backoff_s: float = 0.5, sleep=time.sleep):
        self.server, self.token = server.rstrip("/"), token
        self.retries, self.timeout, self.backoff_s, self.sleep = retries, timeout, backoff_s, sleep
        self._local = threading.local()
        self._me = None

    # ------------------------------------------------------------ transport

    def session(self) -> requests.Session:
        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = requests.Session()
            s.headers["User-Agent"] = f"transformer-grader-cli/{__version__}"
            if self.token:
                s.headers["Authorization"] = f"Bearer {self.token}"
        return s

    def delay(self, attempt: int, response=None) -> float:
        """Exponential backoff with jitter; a Retry-After in seconds is honoured up to the cap."""
        wait = min(self.backoff_s * 2 ** attempt, MAX_BACKOFF_S)
        after = response.headers.get("Retry-After") if response is not None else None
        if after and after.isdigit():
            wait = max(wait, min(float(after), MAX_BACKOFF_S))
        return wait * (1 + random.random() / 4)

    def request(self, method: str, path: str, ok=(200,), **kwargs) -> requests.Response:
        """One call with retries; a status outside `ok` raises the matching ClientError."""
        url = self.server + path
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self.session().request(method, url, timeout=(min(10.0, self.timeout), self.timeout),
                                                  **kwargs)
            except requests.exceptions.SSLError as exc:
                raise Unreachable(f"cannot reach the server at {self.server}: {reason(exc, self.timeout)}") from None
            except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
                if last:
                    tries = f" (tried {attempt + 1} times)" if attempt else ""
                    raise Unreachable(f"cannot reach the server at {self.server}: {reason(exc, self.timeout)}{tries}"
                                      ) from None
                self.sleep(self.delay(attempt))
                continue
            if response.status_code in RETRY_STATUSES and not last:
                self.sleep(self.delay(attempt, response))
                continue
            if response.status_code in ok:
                return response
            raise self.failure(response, attempt)
        raise AssertionError("unreachable")  # the loop returns or raises

    def failure(self, response: requests.Response, attempt: int) -> ClientError:
        message, code = error_message(response)
        status = response.status_code
        if status == 401:
            return AuthFailed(f"the server refused the token (401: {message}); check --token, GRADER_TOKEN or "
                              f"the config file", status, code)
        if status == 403:
            return AuthFailed(f"not allowed with this token (403: {message})", status, code)
        if status in RETRY_STATUSES:
            tries = f" after {attempt + 1} attempts" if attempt else ""
            return Unreachable(f"the server at {self.server} is unavailable{tries} ({status}: {message})", status, code)
        if status == 404:
            return NotFound(message, status, code)
        if status >= 500:
            return ApiError(f"the server failed ({status}: {message})", status, code)
        return ApiError(message, status, code)

    def json(self, method: str, path: str, ok=(200,), **kwargs):
        response = self.request(method, path, ok, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"the server at {self.server} answered {path} without JSON; is it the grader's API?",
                           response.status_code) from None

    # ------------------------------------------------------------ the API

    def me(self) -> dict:
        """{"role": "instructor"|"student", "student": username or None}; asked once."""
        if self._me is None:
            self._me = self.json("GET", "/api/v1/me")
        return self._me

    def assignment(self, slug: str) -> dict:
        return self.json("GET", f"/api/v1/assignments/{slug}")

    def submissions(self, slug: str, student: str | None = None, status: str | None = None):
        """Every submission of the assignment (a student token: their own), oldest first, page by page."""
        offset = 0
        while True:
            params = {"limit": PAGE, "offset": offset, **({"student": student} if student else {}),
                      **({"status": status} if status else {})}
            page = self.json("GET", f"/api/v1/assignments/{slug}/submissions", params=params)
            yield from page
            if len(page) < PAGE:
                return
            offset += len(page)

    def submission(self, submission_id: int) -> dict:
        return self.json("GET", f"/api/v1/submissions/{submission_id}")

    def result(self, submission_id: int) -> dict | None:
        """The latest result, or None while the submission has none yet (a queued or running one answers the
        verdicts so far with partial: true: not a result)."""
        try:
            body = self.json("GET", f"/api/v1/submissions/{submission_id}/result")
        except NotFound as exc:
            if exc.code == "not_graded":
                return None
            raise
        return None if body.get("partial") is True else body

    def upload(self, slug: str, data: bytes, filename: str, student: str | None = None) -> dict:
        """Upload one file; the answer has "duplicate" and, for the latest file sent again, status 200."""
        form = {"student": student} if student else {}
        response = self.request("POST", f"/api/v1/assignments/{slug}/submissions", ok=(200, 201, 202),
                                files={"file": (filename, data, "text/x-python")}, data=form)
        body = response.json()
        body["queued"] = response.status_code == 202
        return body

    def regrade(self, submission_id: int) -> dict:
        return self.json("POST", f"/api/v1/submissions/{submission_id}/regrade", ok=(200, 202))

    def regrade_assignment(self, slug: str, which: str = "counted", confirm: bool = False) -> dict:
        """Without confirm, how many it would regrade ("count", "skipped"); with it, "queued" too."""
        return self.json("POST", f"/api/v1/assignments/{slug}/regrade", ok=(200, 202),
                         json={"which": which, "confirm": confirm})

    def rescore(self, slug: str | None = None) -> dict:
        return self.json("POST", "/api/v1/rescore", json={"assignment": slug} if slug else {})

    def export(self, slug: str) -> list[dict]:
        return self.json("GET", f"/api/v1/assignments/{slug}/export", params={"format": "json"})

    def export_csv(self, slug: str) -> str:
        return self.request("GET", f"/api/v1/assignments/{slug}/export", params={"format": "csv"}).text

    def students(self, removed: bool = False) -> list[dict]:
        return self.json("GET", "/api/v1/students", params={"removed": "true"} if removed else None)

    def student_action(self, username: str, action: str) -> dict:
        """deactivate, reactivate, remove or rotate-token a student (instructor token); the answer's student JSON."""
        return self.json("POST", f"/api/v1/students/{quote(username, safe='')}/{action}", ok=(200, 201))

    def add_student(self, username: str, name: str = "", email: str = "") -> dict:
        return self.json("POST", "/api/v1/students", ok=(200, 201), json={"username": username, "name": name,
                                                                         "email": email})

    def queue(self) -> dict:
        return self.json("GET", "/api/v1/queue")
