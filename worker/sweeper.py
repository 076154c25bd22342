"""The sweeper: the store is the truth, so anything it says is pending but the broker lost is sent again."""
import logging

from grader.app import jobs
from grader.app.db import get_db
from grader.app.queue import pending_task_ids, send_grading
from grader.sandbox.uids import quarantined

log = logging.getLogger(__name__)


def sweep(app) -> dict:
    """One pass: requeue dead workers' submissions and resend queued ones the broker does not hold."""
    cfg = app.config
    in_broker = pending_task_ids(app, cfg["REQUEUE_AFTER_S"])
    with get_db(app).Session() as s:
        resend = jobs.sweep(s, cfg["LEASE_S"], cfg["REQUEUE_AFTER_S"], in_broker, cfg["MAX_ATTEMPTS"])
    sent = [sid for sid, task_id in resend if send_grading(app, sid, task_id)]
    if resend:
        log.warning("sweeper: sent %d lost submission(s) again: %s", len(sent), sent[:20])
    return {"resent": sent, "unsent": len(resend) - len(sent), "broker_known": in_broker is not None,
            "quarantined_uids": sandbox_health()}


def sandbox_health() -> dict:
    """This host's sandbox uids that could not be cleaned after a grading (not leased until a sweep cleans them)."""
    slots = quarantined()
    if slots:
        log.warning("sandbox uids quarantined on this host (not used until clean): %s",
                    {uid: info["reason"][:200] for uid, info in slots.items()})
    return {str(uid): info for uid, info in slots.items()}
