"""tests/sandbox/support.py's backend check: a missing docker backend fails in CI and skips with the reason elsewhere."""
import pytest

from grader.sandbox import docker as docker_backend
from tests.sandbox.support import require_backend


@pytest.mark.parametrize("ci", ["true", "1", "yes", "TRUE"])
def test_docker_tests_fail_rather_than_skip_in_ci(monkeypatch, ci):
    monkeypatch.setattr(docker_backend, "engine_answers", lambda *a, **k: "no docker engine answers: test")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="CI must run this test, but the docker backend is unavailable"):
        require_backend("docker")


@pytest.mark.parametrize("ci", [None, "", "0", "false"])
def test_docker_tests_skip_with_a_reason_locally(monkeypatch, ci):
    monkeypatch.setattr(docker_backend, "engine_answers", lambda *a, **k: "no docker engine answers: test")
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="docker backend is unavailable: no docker engine answers"):
        require_backend("docker")
