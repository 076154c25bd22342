"""`grader serve`: the app under gunicorn, created once (settings read, migrations run) and forked into workers."""
import os

from gunicorn.app.base import BaseApplication
from gunicorn.config import AccessLogFormat

from .admission import admit
from .db import get_db
from .pools import TwoPoolWorker
from .queue import preload

THREADS = 4  # per worker process for reads: a request waiting on the database leaves the core to another
# How long a stopping server lets requests in flight finish before its workers are killed. gunicorn's default (30 s)
# is longer than `docker stop` waits before SIGKILL (10 s), and one stalled upload holds the whole stop that long
# (a CI run waited > 30 s; tests/service/test_service_stop.py). Every request here is short.
GRACEFUL_S = 8
# gunicorn's default line and the time the worker spent on the request (from reading it to the last byte sent: a
# write's wait for its turn is in it, a wait for a free thread comes before and is not): bench/web_load.py reads it.
ACCESS_LOG_FORMAT = AccessLogFormat.default + " %(M)sms"


class Gunicorn(BaseApplication):
    """gunicorn serving an app object that already exists (no import string, no config file, no argv)."""

    def __init__(self, app, options: dict):
        self.app, self.options = app, options
        super().__init__()

    def load_config(self):
        for key, value in self.options.items():
            self.cfg.set(key, value)
        if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 25.1
            # Its control socket is one path per user ($HOME/.gunicorn/gunicorn.ctl): a second `grader serve`
            # (tests, benchmarks) would take it over. Nothing here uses it.
            self.cfg.set("control_socket_disable", True)

    def load(self):
        return self.app


def default_workers() -> int:
    """One worker process per core, at least two (one busy with an upload never stalls every status poll)."""
    return max(2, os.cpu_count() or 1)


def serve(app, host: str, port: int, workers: int | None = None, threads: int | None = None,
          access_log: bool = False) -> None:
    """Serve the app with `workers` processes of `threads` threads for reads and TwoPoolWorker.writers for writes
    (with WEB_TURNS off: `threads` for both), until SIGTERM or SIGINT."""
    # Connections opened so far (the migrations) must not be shared by the forked workers: each opens its own.
    get_db(app).engine.dispose()
    preload(app)  # shared by the forked workers, not imported in each one's first upload
    # gthread, not sync: a sync worker waiting on the database serves no one (bench/web_load.py, 2 workers grading:
    # page-paced polls p99 ~200 ms with sync, ~16 ms with threads); threads also keep pollers' connections alive,
    # and a slow client ties up one thread rather than a whole worker process.
    threads = threads or THREADS
    worker_class = "gthread"
    if app.config["WEB_TURNS"]:
        admit(app, writes=threads)
        worker_class = TwoPoolWorker
    options = {"bind": f"{host}:{port}", "workers": workers or default_workers(), "threads": threads,
               "worker_class": worker_class, "preload_app": True, "graceful_timeout": GRACEFUL_S}
    if access_log:
        options["accesslog"] = "-"
        options["access_log_format"] = ACCESS_LOG_FORMAT
    Gunicorn(app, options).run()
