"""Celery tasks. They take ids; the store decides what a message may do (see grader/app/jobs.py)."""
from celery import shared_task
from flask import current_app
from sqlalchemy.exc import InterfaceError, OperationalError

from . import grading, sweeper


@shared_task(bind=True, name="worker.tasks.grade_submission", acks_late=True, reject_on_worker_lost=True,
             ignore_result=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=5,
             retry_backoff_max=300, max_retries=20)
def grade_submission(self, submission_id: int) -> str:
    """Grade one submission; infrastructure failures come back with backoff, student failures are results."""
    outcome = grading.grade(current_app._get_current_object(), submission_id, task_id=self.request.id)
    if outcome.retry_in_s is not None:
        raise self.retry(countdown=outcome.retry_in_s)
    return outcome.status


@shared_task(name="worker.tasks.sweep", ignore_result=True)
def sweep() -> dict:
    """Queue again what the broker lost: dead workers' submissions and queued ones missing from Redis."""
    return sweeper.sweep(current_app._get_current_object())
