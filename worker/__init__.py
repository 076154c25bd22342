"""The grading workers: a Celery app bound to the Flask app's settings, tasks that take submission ids."""
from celery import Celery, Task
from celery.signals import worker_process_init


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

    worker_process_init.connect(after_fork, weak=False)
    return celery_app
