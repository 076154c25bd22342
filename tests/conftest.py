"""The root conftest: registers the shared fixtures and marks each test by what it needs.

Helpers are plain modules imported by name (tests/support/grading.py, tests/service/svc_helpers.py,
tests/sandbox/support.py); fixtures every folder uses live in the plugin tests/support/fixtures.py, registered
here once (pytest reads `pytest_plugins` in the rootdir conftest only).
"""
import pytest

pytest_plugins = ["tests.support.fixtures"]

# A test that uses one of these fixtures needs PostgreSQL, Redis or live grader processes (a cluster, `make run`,
# `grader serve`): `service`, outside `make test-fast`.
SERVICE_FIXTURES = {"pg_url", "cluster", "make_run", "served"}


def needs_service(item) -> bool:
    """A service fixture, or a parameter that runs the test on PostgreSQL (the `app` store, a migration backend)."""
    callspec = getattr(item, "callspec", None)
    return bool(SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
                or (callspec and "postgresql" in callspec.params.values()))


def pytest_collection_modifyitems(items):
    """Mark `service` the tests that reach PostgreSQL, Redis or live grader processes."""
    for item in items:
        if needs_service(item):
            item.add_marker(pytest.mark.service)
