"""The grading service: a Flask app (JSON API; pages later), a store, and Celery workers (package `worker`)."""
import os

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from . import db as database
from .config import PREFIX, Defaults, instance_path


def create_app(test_config: dict | None = None) -> Flask:
    """Settings from Defaults, then instance/config.py, then GRADER_* variables; or Defaults then test_config."""
    app = Flask(__name__, instance_path=instance_path(), instance_relative_config=True)
    app.config.from_object(Defaults)
    if test_config is None:
        app.config.from_pyfile("config.py", silent=True)
        app.config.from_prefixed_env(PREFIX)
    else:
        app.config.from_mapping(test_config)
    os.makedirs(app.instance_path, exist_ok=True)
    app.config["DATABASE_URL"] = app.config["DATABASE_URL"] or database.default_sqlite_url(app.instance_path)
    app.config["SUBMISSIONS_DIR"] = app.config["SUBMISSIONS_DIR"] or os.path.join(app.instance_path, "submissions")
    from ..configs import check_steps
    app.config["TRAINING_STEPS"] = check_steps(app.config["TRAINING_STEPS"] or {})  # a bad value fails at start

    db = database.init_app(app)
    if app.config["AUTO_MIGRATE"]:
        database.upgrade(db)

    from worker import celery_init_app
    celery_init_app(app)

    from . import api
    from ..registry import check_registry
    check_registry()  # parse the check list now, before any request thread (ast.parse is not thread-safe here)
    app.register_blueprint(api.bp)
    app.register_error_handler(HTTPException, _http_error)
    from .web import init_app as init_pages; init_pages(app)  # noqa: E702  (student and instructor pages: web.py)
    return app


def _http_error(exc: HTTPException):
    """JSON errors under /api/ (unknown routes, 405, 413 while reading an upload); HTML elsewhere."""
    if not request.path.startswith("/api/"):
        return exc
    message = exc.description
    if exc.code == 413:
        from ..source import MAX_BYTES
        message = (f"the upload is larger than the service accepts; a submission may be at most {MAX_BYTES} bytes "
                   "(256 KiB)")
    code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(exc.code, "http_error")
    return jsonify({"error": code, "message": message}), exc.code
