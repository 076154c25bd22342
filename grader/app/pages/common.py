"""What the student and instructor pages share: sign-in in the session, CSRF, per-student rate limits, error pages
that never show a traceback, security headers and template helpers."""
import hmac
import logging
import math
import secrets
from functools import wraps
from urllib.parse import urlsplit

from flask import (Blueprint, current_app, flash, g, redirect, render_template, request, session, url_for)
from werkzeug.exceptions import HTTPException

from .. import accounts, store, throttle
from ..db import session as db_session

log = logging.getLogger(__name__)
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'self'; "
       "frame-ancestors 'self'; base-uri 'none'; form-action 'self'")
STATUS_TEXT = {"queued": "Queued", "running": "Running", "done": "Graded", "failed": "Could not be graded"}


class CSRFError(Exception):
    """A form post without this session's token: forged, or from a page older than the session."""


class RateLimited(Exception):
    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.message, self.retry_after = message, retry_after


def setup_blueprint(bp: Blueprint) -> Blueprint:
    """CSRF on every form post, security headers, and error pages, for one audience's blueprint."""
    bp.before_request(_before)
    bp.after_request(_headers)
    bp.register_error_handler(CSRFError, _csrf_error)
    bp.register_error_handler(RateLimited, _rate_error)
    bp.register_error_handler(store.StoreError, _store_error)
    bp.register_error_handler(HTTPException, _http_error)
    bp.register_error_handler(Exception, _unexpected)
    return bp


# ---------------------------------------------------------------- CSRF

def csrf_token() -> str:
    """This session's form token (made on first use)."""
    token = session.get("_csrf")
    if not token:
        token = session["_csrf"] = secrets.token_urlsafe(32)
    return token


def report_limit(app, endpoint) -> int | None:
    """The bytes a view that takes a report may receive (more than the service's 1 MiB per request); None for any
    other view."""
    setting = getattr(app.view_functions.get(endpoint), "max_upload_setting", None)
    return app.config[setting] + (1 << 20) if setting else None


def _before():
    limit = report_limit(current_app, request.endpoint)
    if limit:  # Flask >= 3.1
        try:
            request.max_content_length = limit
        except AttributeError:
            pass
    if request.method in ("POST", "PUT", "PATCH", "DELETE"):
        sent = request.form.get("csrf_token") or request.headers.get("X-CSRF-Token") or ""
        expected = session.get("_csrf") or ""
        if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
            raise CSRFError()


def allows_upload(setting: str):
    """Mark a view as taking a file up to current_app.config[setting] bytes (plus the module and form)."""
    def decorate(view):
        view.max_upload_setting = setting
        return view
    return decorate


def _headers(response):
    h = response.headers
    h.setdefault("Content-Security-Policy", CSP)
    h.setdefault("X-Content-Type-Options", "nosniff")
    h.setdefault("Referrer-Policy", "same-origin")
    h.setdefault("X-Frame-Options", "SAMEORIGIN")
    h.setdefault("Cache-Control", "no-store")  # pages show grades: never from a shared cache
    return response


# ---------------------------------------------------------------- who is signed in

def sign_in(role: str, **identity) -> None:
    """A fresh session (no fixation) for a student or an instructor; one identity per browser session."""
    session.clear()
    session["who"] = {"role": role, **identity}
    g.pop("who", None)
    csrf_token()


def sign_out() -> None:
    session.clear()
    g.pop("who", None)


def who() -> dict | None:
    """The signed-in identity, checked against the store once per request (a revoked token signs out)."""
    if "who" in g:
        return g.who
    data = session.get("who")
    if data is not None:
        s = db_session()
        if data.get("role") == "student":
            valid = accounts.token_active(s, data.get("token_id"))
        else:
            valid = accounts.active_instructor(s, data.get("id")) is not None
        if not valid:
            session.pop("who", None)
            data = None
    g.who = data
    return data


def signed_in(role: str):
    """View decorator: the identity of `role`, or a redirect to that audience's sign-in page."""
    def decorate(view):
        @wraps(view)
        def wrapper(*args, **kwargs):
            data = who()
            if data is None or data.get("role") != role:
                if data is not None:
                    flash(f"That page is for {role}s; sign in as one to open it.", "error")
                endpoint = "student.signin" if role == "student" else "instructor.signin"
                return redirect(url_for(endpoint, next=request.full_path.rstrip("?")))
            return view(*args, **kwargs)
        return wrapper
    return decorate


def safe_next(target: str | None, default: str) -> str:
    """Only a path on this site: never an open redirect."""
    if not target:
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target


# ---------------------------------------------------------------- rate limits

def check_rate(key: str, limit_setting: str, window_setting: str, what: str) -> None:
    """RateLimited when `key` already acted the configured number of times in the window."""
    cfg = current_app.config
    wait = throttle.rate_limited(db_session(), key, int(cfg[limit_setting]), float(cfg[window_setting]))
    if wait is not None:
        raise RateLimited(f"{what}: please wait {wait:.0f} s and try again.", wait)


def count_rate(key: str) -> None:
    s = db_session()
    throttle.record_event(s, key)
    s.commit()


# ---------------------------------------------------------------- error pages (never a traceback)

def guarded_sign_in(key: str, too_many: str, wrong: str, authenticate, page, check_first: bool = False):
    """Authenticate, slowing failures per client address and per account: (row, None), or (None, the error response).

    A wait refuses only wrong credentials: the right one signs in from another address while the account is
    hammered. With check_first (unguessable tokens) it signs in from the failing address too; without it
    (passwords, which can be guessed) that address waits out its backoff before anything it sends is checked.
    """
    cfg, s = current_app.config, db_session()
    limits = (int(cfg["WEB_SIGNIN_LIMIT"]), float(cfg["WEB_SIGNIN_BACKOFF_S"]), float(cfg["WEB_SIGNIN_WINDOW_S"]))
    key, address = throttle.fit(key), throttle.address_key()
    address_wait = throttle.wait_s(s, address, *limits)
    if address_wait and not check_first:
        return None, _too_many(page, "Too many failed sign-ins from your address", address_wait)
    row = authenticate(s)
    if row is not None:
        throttle.clear_events(s, key)  # not the address's: one valid account must not reset a guesser's count
        s.commit()
        return row, None
    account_wait = throttle.wait_s(s, key, *limits)
    for k in (address, key):
        throttle.record_event(s, k)
    s.commit()
    if address_wait or account_wait:
        return None, _too_many(page, too_many if account_wait else "Too many failed sign-ins from your address",
                               max(address_wait or 0, account_wait or 0))
    return None, (page(wrong), 401)


def _too_many(page, what: str, wait: float):
    """A 429 sign-in page saying how long to wait."""
    seconds = math.ceil(wait)
    return page(f"{what}: please wait {seconds} s and try again."), 429, {"Retry-After": str(seconds)}


def error_page(status: int, title: str, message: str, headers: dict | None = None):
    return render_template("error.html", status=status, title=title, message=message), status, headers or {}


def _csrf_error(_exc):
    return error_page(400, "This form has expired",
                      "The form was not sent from a page of this session (it may be older than your sign-in). "
                      "Go back, reload the page and try again.")


def _rate_error(exc: RateLimited):
    return error_page(429, "Too many requests", exc.message, {"Retry-After": str(int(exc.retry_after) + 1)})


def _store_error(exc: store.StoreError):
    title = {404: "Not found", 409: "Not now", 429: "Too many requests"}.get(exc.status, "That did not work")
    return error_page(exc.status, title, exc.message)


def _http_error(exc: HTTPException):
    if exc.code == 413:
        return error_page(413, "File too large", "The upload is larger than the service accepts: a module may be "
                          "at most 256 KiB and a report at most "
                          f"{current_app.config['WEB_REPORT_MAX_BYTES'] >> 20} MiB.")
    if exc.code == 404:
        return error_page(404, "Not found", "There is no such page, or it is not yours to see.")
    return error_page(exc.code or 500, exc.name, exc.description or "")


def _unexpected(exc: Exception):
    """Anything else is ours: logged with its traceback, shown as a plain apology."""
    log.exception("page %s failed", request.path)
    try:
        db_session().rollback()
    except Exception:  # the database itself may be what failed
        pass
    return error_page(500, "Something went wrong on our side",
                      "The problem has been logged. Try again in a moment; if it persists, tell your instructor.")


# ---------------------------------------------------------------- template helpers

def when(dt) -> str:
    """Naive UTC as '2026-11-29 15:40 UTC'."""
    return dt.strftime("%Y-%m-%d %H:%M UTC") if dt else "-"


def pts(value) -> str:
    """Points without float noise: 7, 7.5, 7.25."""
    if value is None:
        return "-"
    return f"{float(value):.2f}".rstrip("0").rstrip(".")


def form_number(text: str | None) -> float | None:
    """A number from a form field; None when blank; ValueError when not a finite number."""
    text = (text or "").strip()
    if not text:
        return None
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(text)
    return value
