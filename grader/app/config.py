"""Settings: these defaults, then the instance file `config.py`, then `GRADER_*` environment variables (or, for a
test app, these defaults then its test_config)."""
import os

PREFIX = "GRADER"


class Defaults:
    """Every setting the service reads, with its default (docs/service.md explains each)."""
    # None: a random key kept in <instance>/secret_key (made 0600 on first start); a placeholder such as "dev" is refused.
    SECRET_KEY = None
    # None means SQLite in the instance folder; PostgreSQL by URL (postgresql://user@host/db).
    DATABASE_URL = None
    BROKER_URL = "redis://127.0.0.1:6379/0"
    SUBMISSIONS_DIR = None  # None means <instance>/submissions; an archive copy of every upload
    AUTO_MIGRATE = True  # apply Alembic migrations when the app starts (also: grader db upgrade)
    MAX_CONTENT_LENGTH = 1 << 20  # a request body above this is refused (413) before it is read
    QUEUE = "grader"  # the Celery queue grading jobs go to
    # Exactly-once machinery (seconds).
    HEARTBEAT_S = 10.0  # a running job refreshes its heartbeat this often
    LEASE_S = 60.0  # a running job whose heartbeat is older than this is presumed dead
    SWEEP_INTERVAL_S = 30.0  # the sweeper's period (a Celery beat task)
    REQUEUE_AFTER_S = 30.0  # a queued submission absent from the broker this long is sent again
    MAX_ATTEMPTS = 5  # grading attempts (infrastructure failures, lost workers) before 'failed'
    RETRY_BACKOFF_S = 10.0  # first retry delay after an infrastructure failure; doubles, at most 300
    TASK_SOFT_TIME_LIMIT_S = 900
    TASK_TIME_LIMIT_S = 960
    VISIBILITY_TIMEOUT_S = 1800  # Redis redelivers an unacknowledged job after this long
    RESTORE_INTERVAL_S = 10  # how often workers look for such jobs
    PUBLISH_RETRIES = 2  # retries when the web process cannot reach the broker (the sweeper sends later)
    SANDBOX_BACKEND = None  # None: the judge's default, as `grader check`; or process | docker | auto
    SANDBOX_PRESTART = True  # start each grading slot's next sandbox (torch imported) while it waits for a job
    SANDBOX_LOW_PRIORITY = True  # a worker's sandboxes yield the CPU to the web and the database (nice, cgroup, shares)
    WEB_TURNS = True  # `grader serve`: reads and writes in thread pools of their own, uploads one at a time (pools.py)
    STATUS_CACHE = True  # PostgreSQL: web processes keep status answers until a change is notified (status_cache.py)
    # Training step budget per track, e.g. GRADER_TRAINING_STEPS='{"lm": 200}'; a track not named keeps the
    # default (reverse 600, lm 300), the budget the pass thresholds were measured at (docs/training.md).
    TRAINING_STEPS = {}
    ENFORCE_ATTEMPTS = True  # the rubric policy's attempts per period, for student uploads
    CELERY = {}  # extra Celery settings, e.g. GRADER_CELERY__worker_concurrency=2
    # The pages (grader/app/pages/).
    WEB_UPLOAD_LIMIT = 6  # uploads a student may post...
    WEB_UPLOAD_WINDOW_S = 60  # ...within this many seconds (the rubric's attempts per day apply as well)
    WEB_SIGNIN_LIMIT = 10  # failed sign-ins from one address, or for one account, before each waits...
    WEB_SIGNIN_BACKOFF_S = 1.0  # ...this long, doubling with every further failure...
    WEB_SIGNIN_WINDOW_S = 300  # ...at most this long; failures older than this are forgotten
    WEB_REPORT_MAX_BYTES = 10 << 20  # a report (PDF or Markdown) may be this large
    WEB_POLL_S = 2.0  # how often the status page asks for news (JavaScript), or reloads (without)


def instance_path() -> str | None:
    """The instance folder: GRADER_INSTANCE_PATH, else Flask's default (./instance beside the package)."""
    return os.environ.get(f"{PREFIX}_INSTANCE_PATH")


def sweep_queue(config) -> str:
    """The queue of the sweeper's task."""
    return config["QUEUE"] + ".sweep"


def celery_settings(config) -> dict:
    """The Celery configuration derived from the app's settings."""
    soft = config["TASK_SOFT_TIME_LIMIT_S"]
    settings = {
        "broker_url": config["BROKER_URL"],
        "task_ignore_result": True,  # the store holds results; no result backend
        "task_acks_late": True,  # acknowledge after the job ran, so a killed worker's job is delivered again
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,  # long jobs: do not hoard messages a free worker could take
        "task_default_queue": config["QUEUE"],
        "task_soft_time_limit": soft,
        "task_time_limit": config["TASK_TIME_LIMIT_S"],
        # kombu scans for jobs past the visibility timeout every restore interval (throttle 1: every time).
        "broker_transport_options": {"visibility_timeout": config["VISIBILITY_TIMEOUT_S"],
                                     "unacked_restore_interval": config["RESTORE_INTERVAL_S"],
                                     "unacked_restore_throttle": 1},
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # a Redis restart must not stop the worker
        # A grading under way when Redis restarts finishes and stores its result (the store fences it).
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        # The sweeper has a queue of its own, so a backlog of grading jobs cannot hold it up.
        "task_routes": {"worker.tasks.sweep": {"queue": sweep_queue(config)}},
        "beat_schedule": {"sweep": {"task": "worker.tasks.sweep", "schedule": float(config["SWEEP_INTERVAL_S"]),
                                    "options": {"expires": float(config["SWEEP_INTERVAL_S"])}}},
        "imports": ("worker.tasks",),
    }
    settings.update(config.get("CELERY") or {})
    return settings
