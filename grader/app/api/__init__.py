"""The JSON API under /api/v1: its routes and the OpenAPI document that describes them."""
from .routes import bp  # noqa: F401
from . import roster  # noqa: F401,E402  (the roster's routes, on the same blueprint)
from . import grading  # noqa: F401,E402  (its routes, on the same blueprint)
from . import analytics  # noqa: F401,E402  (class analytics: JSON and CSV, on the same blueprint)
from . import feedback  # noqa: F401,E402  (feedback visibility's routes, on the same blueprint)
from . import assignments  # noqa: F401,E402  (the assignment rules' routes, on the same blueprint)
