"""In CI a part the tests need (docker, the browser, PostgreSQL, Redis, an isolation layer) is a failure, not a skip."""
import os

import pytest


def in_ci() -> bool:
    """True when CI is set to anything but empty, 0, false or no (.ci/run sets CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str):
    """Fail in CI, where .ci/run installs and starts every part; skip elsewhere, with the reason."""
    if in_ci():
        pytest.fail(f"CI must run this test, but {reason}")
    pytest.skip(reason)
