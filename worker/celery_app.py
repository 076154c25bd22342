"""Entry point for the celery command: `celery -A worker.celery_app worker` (or simply `grader worker`)."""
from grader.app import create_app

flask_app = create_app()
celery = flask_app.extensions["celery"]
