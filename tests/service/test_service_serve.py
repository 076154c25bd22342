"""`grader serve` runs gunicorn (worker processes forked from one app) and answers; --dev keeps Flask's server."""
import http.client
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from .svc_cluster import BIN, Http, children, free_port, wait_for
from .svc_helpers import make_app, make_course

REFERENCE = (Path(__file__).resolve().parents[2] / "submissions" / "reference_lm.py").read_bytes()


def get(port: int, path: str, headers: dict | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


@pytest.fixture
def served(tmp_path, request):
    """`grader serve` with the given arguments on SQLite, until the test ends; yields (process, port, url)."""
    port, url = free_port(), f"sqlite:///{tmp_path}/grader.sqlite"
    env = {**os.environ, "GRADER_INSTANCE_PATH": str(tmp_path / "instance"), "GRADER_DATABASE_URL": url,
           "GRADER_BROKER_URL": "memory://", "GRADER_SECRET_KEY": "test-" + "k" * 32}
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen([str(BIN / "grader"), "serve", "--port", str(port), *request.param], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def up():
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        try:
            return get(port, "/api/v1/health").status == 200
        except OSError:
            return False
    try:
        wait_for(up, 60, what="grader serve to answer")
        yield proc, port, url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("served", [["--workers", "2"]], indirect=True)
def test_grader_serve_runs_gunicorn_workers_and_stops_on_sigterm(served, tmp_path, monkeypatch):
    proc, port, url = served
    health = get(port, "/api/v1/health")
    assert health.status == 200 and health.getheader("Server", "").startswith("gunicorn"), health.getheaders()
    workers = wait_for(lambda: len(children(proc.pid)) == 2 and children(proc.pid), 30, what="two gunicorn workers")
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    course = make_course(make_app(url, tmp_path))
    code, sub = Http(f"http://127.0.0.1:{port}").upload("cap", course.alice, REFERENCE, "mine.py")
    assert code == 202, sub
    auth = {"Authorization": f"Bearer {course.alice}"}
    first = get(port, f"/api/v1/submissions/{sub['id']}", auth)
    assert first.status == 200 and first.getheader("ETag")
    again = get(port, f"/api/v1/submissions/{sub['id']}", {**auth, "If-None-Match": first.getheader("ETag")})
    assert again.status == 304, "every worker computes the same ETag for the same status"
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(30) == 0, "gunicorn stops gracefully on SIGTERM"
    assert not [w for w in workers if os.path.exists(f"/proc/{w}")], "the workers stop with the master"


@pytest.mark.parametrize("served", [["--dev"]], indirect=True)
def test_grader_serve_dev_is_flasks_development_server(served):
    proc, port, _ = served
    health = get(port, "/api/v1/health")
    assert health.status == 200 and health.getheader("Server", "").startswith("Werkzeug"), health.getheaders()
    assert children(proc.pid) == [], "the development server is one process"


@pytest.mark.parametrize("served", [["--workers", "2", "--access-log"]], indirect=True)
def test_grader_serve_access_log_names_each_request(served, tmp_path):
    proc, port, _ = served
    assert get(port, "/api/v1/health?probe=access-log").status == 200
    wait_for(lambda: "GET /api/v1/health?probe=access-log" in (tmp_path / "serve.log").read_text(), 10,
             what="the request in gunicorn's access log")
    line = next(x for x in (tmp_path / "serve.log").read_text().splitlines() if "probe=access-log" in x)
    assert re.search(r'" 200 \d+ .* \d+ms$', line), f"status, size and the worker's time on the request: {line}"


PRELOAD = """
import os, sys
from grader.app import create_app
from grader.app.queue import preload
def sockets():
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # the descriptor listdir itself used
    return found
app = create_app({"DATABASE_URL": sys.argv[1], "BROKER_URL": sys.argv[2], "SECRET_KEY": "test-" + "k" * 32})
before, fresh = sockets(), "kombu.transport.redis" not in sys.modules
preload(app)
print(fresh, "kombu.transport.redis" in sys.modules, sockets() - before)
"""


def test_preload_imports_the_broker_transport_before_the_fork_and_connects_to_nothing(tmp_path, monkeypatch):
    """What `grader serve` runs before forking its workers: the transport is imported (not in each worker's first
    upload), and nothing is connected, so a broker that is down does not stop the server starting."""
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    nobody = f"redis://127.0.0.1:{free_port()}/0"  # no server listens there
    out = subprocess.run([str(BIN / "python"), "-c", PRELOAD, f"sqlite:///{tmp_path}/g.sqlite", nobody],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "0"], out.stdout
