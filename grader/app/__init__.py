"""The grading service: a Flask app (JSON API, student and instructor pages) over a store, sending grading jobs to
Celery workers (package `worker`, which imports this one)."""
import os

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from ..configs import check_steps
from ..registry import check_registry
from ..source import MAX_BYTES
from . import api, db as database, instance, pages, status_cache
from .config import PREFIX, Defaults, instance_path
from .queue import celery_init_app


def create_app(test_config: dict | None = None) -> Flask:
    """Settings from Defaults, then instance/config.py, then GRADER_* variables; or Defaults then test_config."""
    if test_config is None:
        instance.close_process()  # a service process: what it writes in the instance is 0600 from the first write
    app = Flask(__name__, instance_path=instance_path(), instance_relative_config=True)
    app.config.from_object(Defaults)
    if test_config is None:
        app.config.from_pyfile("config.py", silent=True)
        app.config.from_prefixed_env(PREFIX)
        raw_key = os.environ.get(f"{PREFIX}_SECRET_KEY")
        if raw_key is not None:  # as written: JSON parsing would turn a hex key such as "5e31..." into a float
            app.config["SECRET_KEY"] = raw_key or None  # empty (compose without a key): the instance's own key
    else:
        app.config.from_mapping(test_config)
    instance.make_private_dir(app.instance_path)
    app.config["DATABASE_URL"] = app.config["DATABASE_URL"] or database.default_sqlite_url(app.instance_path)
    app.config["SUBMISSIONS_DIR"] = app.config["SUBMISSIONS_DIR"] or os.path.join(app.instance_path, "submissions")
    # What an older version (or another umask) left readable is closed at every start.
    instance.lock_down(app.instance_path)
    if os.path.isdir(app.config["SUBMISSIONS_DIR"]):
        instance.lock_down(app.config["SUBMISSIONS_DIR"])
    app.config["SECRET_KEY"] = instance.secret_key(app.config.get("SECRET_KEY"), app.instance_path,
                                                   generate=test_config is None)
    app.config["TRAINING_STEPS"] = check_steps(app.config["TRAINING_STEPS"] or {})  # a bad value fails at start

    db = database.init_app(app)
    if app.config["AUTO_MIGRATE"]:
        database.upgrade(db)

    celery_init_app(app)
    # Made now, not at the first poll: its hooks on the sessions then see every write of this process from the start
    # (a write flushed before a lazy registration waited for its notification), and no two request threads race to
    # make it. Its listener thread still starts at the first poll, after gunicorn forks.
    status_cache.for_app(app)

    check_registry()  # parse the check list now, before any request thread (ast.parse is not thread-safe here)
    app.register_blueprint(api.bp)
    app.register_error_handler(HTTPException, _http_error)
    pages.init_app(app)  # the student and instructor blueprints
    return app


def _http_error(exc: HTTPException):
    """JSON errors under /api/ (unknown routes, 405, 413 while reading an upload); HTML elsewhere."""
    if not request.path.startswith("/api/"):
        return exc
    message = exc.description
    if exc.code == 413:
        message = (f"the upload is larger than the service accepts; a submission may be at most {MAX_BYTES} bytes "
                   "(256 KiB)")
    code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(exc.code, "http_error")
    return jsonify({"error": code, "message": message}), exc.code
