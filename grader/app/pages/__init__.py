"""The student and instructor pages."""
from .common import init_app  # noqa: F401
