"""The compose stack for real: built, started, an upload graded in a sandbox container as `grader check` grades it, torn down.

In CI (CI set) a missing engine or docker-compose is a failure; elsewhere the test skips with the reason. A
broken image build always fails. GRADER_COMPOSE_KEEP=1 leaves the stack up for a look.
Fields compared: the whole report except `timings`, each check's `duration_s`, `score` (computed by the
service from its rubric) and `sandbox.backend` and `sandbox.layers` (`docker` and its container's isolation in the stack,
`process` and its uid/cgroup/bwrap here); the sandbox's `limits` and `killed` must still be equal.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.ci import missing

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REFERENCE = ROOT / "submissions" / "reference_lm.py"
ARTIFACTS = ROOT / "tests" / "artifacts"
# Empty: every check, as `grader check`; a comma-separated list narrows both sides alike.
CHECKS = os.environ.get("GRADER_COMPOSE_CHECKS", "")
GRADE_TIMEOUT_S = float(os.environ.get("GRADER_COMPOSE_TIMEOUT_S", "900"))
WORKERS = int(os.environ.get("GRADER_COMPOSE_WORKERS", "2"))  # started with --scale worker=N


def unavailable(reason: str):
    """Fail in CI, skip elsewhere."""
    missing(reason)


def run(cmd, timeout=600, check=True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def comparable(report: dict) -> dict:
    """What must be equal between the stack's grading and `grader check`'s (see the module docstring)."""
    out = {k: v for k, v in report.items() if k not in ("timings", "score", "sandbox")}
    out["sandbox"] = {k: v for k, v in report.get("sandbox", {}).items() if k not in ("backend", "layers", "weak", "missing")}
    out["checks"] = [{k: v for k, v in c.items() if k != "duration_s"} for c in report["checks"]]
    return out


def api(base: str, method: str, path: str, token: str, body: bytes | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(base + path, data=body, method=method, headers={"Authorization": f"Bearer {token}", "Content-Type": "text/x-python"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def sandbox_containers() -> set[str]:
    """Ids of the sandbox containers on the engine (the workers start them; label grader.sandbox)."""
    return set(run(["docker", "ps", "-aq", "--no-trunc", "--filter", "label=grader.sandbox"]).stdout.split())


@pytest.fixture(scope="module")
def stack():
    """The stack under a project name of its own on a free port; `down -v` whatever happens."""
    if shutil.which("docker") is None or run(["docker", "info"], check=False, timeout=30).returncode != 0:
        unavailable("no docker engine answers (scripts/start-dockerd.sh starts one)")
    if shutil.which("docker-compose") is None:
        unavailable("docker-compose is not installed (apt-get install docker-compose)")
    timings = {}
    start = time.monotonic()
    run(["scripts/build-images.sh"], timeout=1800)  # a broken build is a failure, not a reason to skip
    timings["build_images_s"] = round(time.monotonic() - start, 1)
    env = dict(os.environ)
    for line in (ROOT / "build" / "compose.env").read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = value
    port = free_port()
    env.update(GRADER_WEB_PORT=str(port), GRADER_SECRET_KEY=uuid.uuid4().hex, POSTGRES_PASSWORD=uuid.uuid4().hex)
    compose = ["docker-compose", "-p", f"gradertest{uuid.uuid4().hex[:8]}", "-f", str(ROOT / "docker-compose.yml")]
    before = sandbox_containers()
    try:
        start = time.monotonic()
        run(compose + ["up", "-d", "--scale", f"worker={WORKERS}"], env=env, timeout=600)
        deadline = time.monotonic() + 300
        while True:
            ids = run(compose + ["ps", "-q", "web", "worker", "redis", "postgres"], env=env).stdout.split()
            health = [run(["docker", "inspect", "-f", "{{.State.Health.Status}}", i], check=False).stdout.strip()
                      for i in ids]
            if len(ids) == 3 + WORKERS and all(h == "healthy" for h in health):
                break
            if time.monotonic() > deadline:
                logs = run(compose + ["logs", "--tail", "40"], env=env, check=False).stdout
                raise AssertionError(f"the stack did not become healthy in 300 s: {health}\n{logs}")
            time.sleep(1)
        timings["up_to_healthy_s"] = round(time.monotonic() - start, 1)
        pong = run(compose + ["exec", "-T", "worker", "celery", "-A", "worker.celery_app", "inspect", "ping"],
                   env=env, timeout=120).stdout
        assert f"{WORKERS} node" in pong, f"--scale worker={WORKERS} should give {WORKERS} workers:\n{pong}"

        def cli(*args) -> str:
            return run(compose + ["exec", "-T", "web", "grader", *args], env=env).stdout.strip()
        cli("assignment", "create", "capstone", "--title", "Capstone", *(["--checks", CHECKS] if CHECKS else []))
        cli("roster", "add", "alice")
        student = cli("token", "create", "--student", "alice").splitlines()[-1]
        instructor = cli("token", "create", "--instructor").splitlines()[-1]
        yield dict(base=f"http://127.0.0.1:{port}", student=student, instructor=instructor,
                   compose=compose, env=env, timings=timings)
    finally:
        if os.environ.get("GRADER_COMPOSE_KEEP") is None:
            down = run(compose + ["down", "-v", "--remove-orphans"], env=env, check=False, timeout=300)
            assert down.returncode == 0, down.stderr
            # Each worker keeps a sandbox container started ahead of its next job: stopping the worker removes it.
            left = set()
            for _ in range(30):
                left = sandbox_containers() - before
                if not left:
                    break
                time.sleep(1)
            assert not left, f"sandbox containers left after the stack went down: {sorted(left)}"


def test_an_upload_through_the_api_is_graded_in_a_sandbox_container_as_grader_check_grades_it(stack):
    base, student = stack["base"], stack["student"]
    start = time.monotonic()
    status, sub = api(base, "POST", f"/api/v1/assignments/capstone/submissions?filename={REFERENCE.name}",
                      student, REFERENCE.read_bytes())
    assert status == 202, (status, sub)
    deadline = time.monotonic() + GRADE_TIMEOUT_S
    while True:
        _, now = api(base, "GET", f"/api/v1/submissions/{sub['id']}", student)
        if now.get("status") in ("done", "failed") or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert now.get("status") == "done", f"not graded within {GRADE_TIMEOUT_S:g} s: {now}"
    _, result = api(base, "GET", f"/api/v1/submissions/{sub['id']}/result", stack["instructor"])
    stack["timings"]["upload_to_graded_s"] = round(time.monotonic() - start, 1)
    report = result["report"]
    assert report["sandbox"]["backend"] == "docker", f"the stack must grade in a sandbox container: {report['sandbox']}"

    local = run([str(BIN / "grader"), "check", str(REFERENCE), "--json", *(["--only", CHECKS] if CHECKS else [])],
                timeout=GRADE_TIMEOUT_S)
    expected = json.loads(local.stdout)
    assert comparable(report) == comparable(expected), "the stack graded differently from grader check"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "compose.json").write_text(json.dumps(stack["timings"], indent=2))


def test_the_workers_yield_the_cpu_to_the_web_and_their_sandboxes_to_them(stack):
    """cpu.shares of each container (a nice-0 task's are 1024): web first, then the workers, their sandboxes last."""
    from grader.sandbox.cgroup import JUDGE_SHARES
    from grader.sandbox.docker import CPU_SHARES

    def shares(containers) -> list[int]:
        return [int(run(["docker", "inspect", "-f", "{{.HostConfig.CpuShares}}", i]).stdout) for i in containers]

    def service(name: str) -> list[str]:
        return run(stack["compose"] + ["ps", "-q", name], env=stack["env"]).stdout.split()
    assert shares(service("worker")) == [JUDGE_SHARES] * WORKERS
    assert all(s in (0, 1024) for s in shares(service("web"))), "the web keeps the default weight (0 reads as 1024)"
    sandboxes = sandbox_containers()
    assert sandboxes, "each worker keeps a sandbox container started ahead"
    assert set(shares(sandboxes)) == {CPU_SHARES}
