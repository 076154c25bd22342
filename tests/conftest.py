"""The root conftest: registers the shared fixtures and marks each test by what it needs.

Helpers are plain modules imported by name (tests/support/grading.py, tests/service/svc_helpers.py,
tests/sandbox/support.py); fixtures every folder uses live in the plugin tests/support/fixtures.py, registered
here once (pytest reads `pytest_plugins` in the rootdir conftest only).
"""
import pytest

pytest_plugins = ["tests.support.fixtures"]

# A test that uses one of these fixtures needs PostgreSQL, Redis or a live worker: `service`, outside `make test-fast`.
SERVICE_FIXTURES = {"pg_url", "cluster"}


def pytest_collection_modifyitems(items):
    """Mark `service` the tests that reach PostgreSQL, Redis or a live cluster through a fixture."""
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.service)
