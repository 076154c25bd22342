"""The student and instructor pages: a blueprint each (student.py, instructor.py), what they share in common.py."""
from . import common, instructor, student
from . import gradebook, roster  # noqa: F401,E402  (the gradebook export and the roster, on the instructor blueprint)
from . import grading  # noqa: F401,E402  (its pages, on the instructor and student blueprints)
from . import analytics  # noqa: F401,E402  (class analytics, on the instructor blueprint)
from . import assignments  # noqa: F401,E402  (assignment settings and extensions, on the instructor blueprint)
from . import feedback  # noqa: F401,E402  (feedback visibility per item, on the instructor blueprint)


def init_app(app) -> None:
    """Register both blueprints and the helpers their templates use (their settings are in config.Defaults)."""
    if not app.config.get("SESSION_COOKIE_SAMESITE"):
        app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    app.register_blueprint(student.bp)
    app.register_blueprint(instructor.bp)
    app.jinja_env.globals.update(csrf_token=common.csrf_token, who=common.who, status_text=common.STATUS_TEXT)
    app.jinja_env.filters.update(when=common.when, pts=common.pts)
