"""The JSON API under /api/v1: its routes and the OpenAPI document that describes them."""
from .routes import bp  # noqa: F401
