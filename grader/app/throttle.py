"""Rate limits, counted as rate events in the store: uploads per student in a window, and failed sign-ins, which slow
the one who fails, per client address and per account, with a doubling wait.

A wait never stops the right credential from another address (and for tokens, from any address): counting
failures per account alone let anyone lock any roster id out with ten wrong tokens.
"""
import hashlib
from datetime import timedelta

from flask import request
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from .models import RateEvent, utcnow

KEY_CHARS = 120  # rate_events.key is 128 characters


def fit(event_key: str) -> str:
    """A rate-event key that fits the column: a long one (a form's username is free text) is hashed."""
    if len(event_key) <= KEY_CHARS:
        return event_key
    return f"{event_key[:40]}:sha256:{hashlib.sha256(event_key.encode()).hexdigest()[:40]}"


def address_key() -> str:
    """The client's address as the server sees it (behind a proxy, configure it to pass the real one)."""
    return fit(f"signin:addr:{request.remote_addr or 'unknown'}")


def wait_s(s: Session, event_key: str, free: int, first_s: float, window_s: float) -> float | None:
    """Seconds `event_key` must still wait: none for its first `free` failures in the window, then first_s doubling."""
    now = utcnow()
    times = list(s.scalars(select(RateEvent.at).where(RateEvent.key == event_key,
                                                      RateEvent.at > now - timedelta(seconds=window_s))
                           .order_by(RateEvent.at)))
    if free <= 0 or len(times) < free:  # a limit of 0 turns the throttle off
        return None
    wait = min(window_s, first_s * 2 ** min(len(times) - free, 30))
    left = (times[-1] + timedelta(seconds=wait) - now).total_seconds()
    return left if left > 0 else None


def rate_limited(s: Session, key: str, limit: int, window_s: float) -> float | None:
    """Seconds until `key` may act again when it already acted `limit` times in the window, else None."""
    now = utcnow()
    since = now - timedelta(seconds=window_s)
    times = list(s.scalars(select(RateEvent.at).where(RateEvent.key == key, RateEvent.at > since)
                           .order_by(RateEvent.at)))
    if limit <= 0 or len(times) < limit:
        return None
    return max(1.0, (times[-limit] + timedelta(seconds=window_s) - now).total_seconds())


def record_event(s: Session, key: str, keep_s: float = 86400.0) -> None:
    """Count one action under `key`, and forget this key's actions older than keep_s."""
    now = utcnow()
    s.execute(delete(RateEvent).where(RateEvent.key == key, RateEvent.at < now - timedelta(seconds=keep_s)))
    s.add(RateEvent(key=key, at=now))
    s.flush()


def clear_events(s: Session, key: str) -> None:
    s.execute(delete(RateEvent).where(RateEvent.key == key))
