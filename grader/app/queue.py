"""The app's side of the job queue: Celery bound to the app (`celery_init_app`), grading jobs sent by task name,
and which jobs the broker holds (for the sweeper). The tasks themselves live in the `worker` package, which imports
the app; the app never imports `worker`.
"""
import json
import logging
import time

from celery import Celery, Task

from .config import celery_settings

log = logging.getLogger(__name__)
GRADE_TASK = "worker.tasks.grade_submission"
# kombu's Redis transport keeps delivered, unacknowledged messages in this hash (kombu.transport.redis).
UNACKED_KEY = "unacked"
UNACKED_INDEX_KEY = "unacked_index"  # delivery tag -> delivery time


def celery_init_app(app) -> Celery:
    """Create the Celery app from the Flask config; every task runs inside the Flask app context.

    `worker/` connects the worker processes' start and fork hooks; they find the Flask app as `flask_app`.
    """
    class FlaskTask(Task):
        def __call__(self, *args, **kwargs):
            with app.app_context():
                return self.run(*args, **kwargs)

    celery_app = Celery(app.name, task_cls=FlaskTask)
    celery_app.config_from_object(celery_settings(app.config))
    celery_app.set_default()
    celery_app.flask_app = app
    app.extensions["celery"] = celery_app
    return celery_app


def preload(app) -> None:
    """Import what publishing the first job imports (the broker's transport, Celery's event dispatcher), opening
    no connection: called before gunicorn forks, it spares each web process doing it in its first upload (about
    0.3 s holding the import lock and the GIL while the other requests wait, bench/NOTES.md)."""
    app.extensions["celery"].connection_for_write().release()  # kombu connects lazily: this only imports
    import celery.events.dispatcher  # noqa: F401  (send_task asks for it)


def send_grading(app, submission_id: int, task_id: str) -> bool:
    """Publish one job; False (logged) when the broker cannot be reached: the sweeper sends it later."""
    celery_app = app.extensions["celery"]
    policy = {"max_retries": app.config["PUBLISH_RETRIES"], "interval_start": 0, "interval_step": 0.5,
              "interval_max": 1}
    try:
        celery_app.send_task(GRADE_TASK, args=[submission_id], task_id=task_id, queue=app.config["QUEUE"],
                             retry=True, retry_policy=policy)
    except Exception as exc:  # the broker is down: the store keeps the submission queued
        log.warning("could not queue submission %s (%s: %s); the sweeper will send it", submission_id,
                    type(exc).__name__, exc)
        return False
    return True


def commit_and_send(app, s, subs) -> None:
    """Commit the session, then send each submission's job: a worker must find the submission queued in the store."""
    s.commit()
    for sub in subs:
        send_grading(app, sub.id, sub.task_id)


def pending_task_ids(app, max_unacked_age_s: float) -> set[str] | None:
    """Task ids waiting in the Redis queue, or delivered less than max_unacked_age_s ago and not yet acknowledged.

    None when unknown (not Redis, or Redis down). A message a worker took long ago for a submission that is
    still queued belongs to a worker that died before starting it; leaving it out lets the sweeper resend.
    """
    url = app.config["BROKER_URL"]
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    import redis  # only the sweeper reads the broker: web processes need not import it (0.15 s)
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        queued = client.lrange(app.config["QUEUE"], 0, -1)  # the queue before the unacked set: see docs/service.md
        tags = client.zrangebyscore(UNACKED_INDEX_KEY, time.time() - max_unacked_age_s, "+inf")
        unacked = client.hmget(UNACKED_KEY, tags) if tags else []
    except redis.RedisError as exc:
        log.warning("cannot read the broker (%s); the sweeper waits", exc)
        return None
    finally:
        client.close()
    ids = {_task_id(_load(raw)) for raw in queued}
    for raw in unacked:
        entry = _load(raw) if raw else None
        ids.add(_task_id(entry[0] if isinstance(entry, list) and entry else None))
    ids.discard(None)
    return ids


def _load(raw):
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _task_id(message) -> str | None:
    if isinstance(message, dict):
        headers = message.get("headers") or {}
        return headers.get("id") or (message.get("properties") or {}).get("correlation_id")
    return None
