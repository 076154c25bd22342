"""The grading workers: Celery tasks that take submission ids, and the worker processes' start and fork hooks.

The Celery app itself is the Flask app's (grader/app/queue.py, `celery_init_app`); Celery imports `worker.tasks`
(and so this package) before it starts a worker, so the hooks below are connected before they fire.
"""
import logging

from celery import current_app
from celery.signals import worker_init, worker_process_init, worker_process_shutdown
from grader.sandbox import Limits
from grader.sandbox.base import lower_judge, set_low_priority
from grader.sandbox.prestart import prestarted

logger = logging.getLogger(__name__)


@worker_init.connect(weak=False)
def before_fork(**_):
    # The judge imports torch (about 2 s): once here, before the pool forks, instead of in each pool process at
    # its first job. Importing runs no torch op, so no thread pool exists yet to break in the forked children.
    import grader.judge  # noqa: F401


@worker_process_init.connect(weak=False)
def after_fork(**_):
    app = current_app.flask_app
    # A pool child must not reuse the parent's database sockets.
    app.extensions["grader.db"].after_fork()
    # One torch thread for the judge: a slot is one core, and an idle OpenMP helper spins on the core that this
    # slot's sandbox trains on (the judges' CPU in a burst fell about a tenth; bench/NOTES.md, twelfth session).
    import torch
    torch.set_num_threads(1)
    logger.info("the judge's torch threads: %d", torch.get_num_threads())
    # This slot's sandboxes, and its judge less so, yield the CPU to the web and the database (issue 19).
    low = app.config.get("SANDBOX_LOW_PRIORITY", True)
    set_low_priority(low)
    if low:
        logger.info("the judge's CPU priority: %s", lower_judge())
    if app.config.get("SANDBOX_PRESTART", True):
        _prestarter(app).start_next(Limits())  # the first job finds its sandbox started too (default limits)


@worker_process_shutdown.connect(weak=False)
def before_exit(**_):
    app = current_app.flask_app
    if app.config.get("SANDBOX_PRESTART", True):
        _prestarter(app).close()  # billiard ends pool children without running atexit


def _prestarter(app):
    """This pool child's Prestarter for the configured backend (worker/grading.py grades with the same one)."""
    return prestarted(app.config.get("SANDBOX_BACKEND") or "process")
