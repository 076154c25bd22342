"""The grading workers: a Celery app bound to the Flask app's settings, tasks that take submission ids."""
from celery import Celery, Task
from celery.signals import worker_init, worker_process_init, worker_process_shutdown


def celery_init_app(app) -> Celery:
    """Create the Celery app from the Flask config; every task runs inside the Flask app context."""
    from grader.app.config import celery_settings

    class FlaskTask(Task):
        def __call__(self, *args, **kwargs):
            with app.app_context():
                return self.run(*args, **kwargs)

    celery_app = Celery(app.name, task_cls=FlaskTask)
    celery_app.config_from_object(celery_settings(app.config))
    celery_app.set_default()
    app.extensions["celery"] = celery_app

    def after_fork(**_):
        # A pool child must not reuse the parent's database sockets.
        app.extensions["grader.db"].after_fork()
        if app.config.get("SANDBOX_PRESTART", True):
            from grader.sandbox import Limits
            _prestarter(app).start_next(Limits())  # the first job finds its sandbox started too (default limits)

    def before_exit(**_):
        if app.config.get("SANDBOX_PRESTART", True):
            _prestarter(app).close()  # billiard ends pool children without running atexit

    def before_fork(**_):
        # The judge imports torch (about 2 s): once here, before the pool forks, instead of in each pool process at
        # its first job. Importing runs no torch op, so no thread pool exists yet to break in the forked children.
        import grader.judge  # noqa: F401

    worker_init.connect(before_fork, weak=False)
    worker_process_init.connect(after_fork, weak=False)
    worker_process_shutdown.connect(before_exit, weak=False)
    return celery_app


def _prestarter(app):
    """This pool child's Prestarter for the configured backend (worker/grading.py grades with the same one)."""
    from grader.sandbox.prestart import prestarted
    return prestarted(app.config.get("SANDBOX_BACKEND") or "process")
