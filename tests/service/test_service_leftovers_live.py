"""Leftovers through the live service: a real `grader worker` (PostgreSQL, a Redis of our own, the web app over
HTTP) grades a submission that leaves SysV objects, /run/lock files, 3000-deep trees, 100k files, odd entries and
a daemon, then a correct one: full marks, every layer, and nothing of the first on the host. Process and docker."""
import os
from pathlib import Path

import pytest

from grader.app.db import get_db
from grader.registry import check_ids
from grader.sandbox.cleanup import sysv_objects
from grader.sandbox.docker import SANDBOX_UID
from grader.sandbox.process import FULL, SHARED_TMP
from grader.sandbox.uids import FIRST_UID, POOL_SIZE
from tests.sandbox.support import layer_missing, require_backend

from .svc_cluster import Http, LiveServer, Worker, cluster_app, wait_for
from .svc_helpers import make_course

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()
ATTACKS = ROOT / "tests" / "attacks"
LEFTOVERS = ("sysv_ipc", "run_lock", "deep_tree", "many_files", "odd_files", "daemon")
MARKS = ("grader-left-", "grader-deep-", "grader-many-", "grader-odd-", "grader-daemon-heartbeat")
FULL_CHECKS = [c for c in check_ids() if c not in ("training", "evaluation")]
SETTINGS = {"HEARTBEAT_S": 1, "LEASE_S": 30, "RETRY_BACKOFF_S": 1, "ENFORCE_ATTEMPTS": False}


def host_traces(backend: str) -> list[str]:
    uids = range(FIRST_UID, FIRST_UID + POOL_SIZE) if backend == "process" else (SANDBOX_UID,)
    left = [f"sysv {k} {i} of uid {uid}" for uid in uids for k, i in sysv_objects(uid)]
    for top in SHARED_TMP:
        try:
            left += [f"file {e.path}" for e in os.scandir(top) if e.name.startswith(MARKS)]
        except OSError:
            pass
    return left


@pytest.fixture(scope="module", params=["process", pytest.param("docker", marks=pytest.mark.docker)])
def live(request, pg_url, tmp_path_factory):
    backend = request.param
    if backend == "process" and os.geteuid() != 0:
        layer_missing("the process backend's full set of layers (uid pool, cgroup) needs root")
    require_backend(backend)
    workdir = tmp_path_factory.mktemp(f"leftovers-{backend}")
    app, redis, env = cluster_app(pg_url, workdir, {**SETTINGS, "SANDBOX_BACKEND": backend})
    env.pop("GRADER_SANDBOX_ALLOW_WEAK", None)
    course = make_course(app, "quick", ["split_heads", "attention_sdpa", "rope"])
    from grader.app import store
    with get_db(app).session() as s:
        store.create_assignment(s, "full", title="Full", checks=FULL_CHECKS)
    server = LiveServer(app).start()
    worker = Worker(f"leftovers-{backend}", env, workdir)  # one worker, one slot: both gradings on it
    try:
        worker.start()
        yield backend, app, Http(server.url), course, worker
    finally:
        worker.kill()
        server.stop()
        redis.stop()
        get_db(app).engine.dispose()


def graded(http: Http, token: str, sub: dict, worker: Worker) -> dict:
    def result():
        _, now = http.get(sub["links"]["self"], token)
        return now if now.get("status") in ("done", "failed") else None
    done = wait_for(result, 600, 0.5, f"submission {sub['id']} to be graded")
    assert done["status"] == "done", (done, worker.text()[-3000:])
    status, body = http.get(sub["links"]["result"], token)
    assert status == 200, body
    return body["report"]


def test_leftovers_do_not_reach_the_next_submission(live):
    backend, app, http, course, worker = live
    text = REFERENCE.decode() + "".join(f"\n\n# ---- {a} ----\n" + (ATTACKS / f"{a}.py").read_text() for a in LEFTOVERS)
    status, sub = http.upload("quick", course.alice, text.encode(), "leftovers.py")
    assert status == 202, sub
    report = graded(http, course.alice, sub, worker)
    checks = {c["id"]: c for c in report["checks"]}
    assert {c["status"] for c in checks.values()} == {"pass"}, report["checks"]
    printed = checks["attention_sdpa"]["stdout"]
    for text in ("left sysv shm=2 msg=2 sem=2", "left a tree in /tmp: 3000 levels", "left odd entries in ."):
        assert text in printed, f"the attack did not leave what the test needs: {printed}"

    status, nxt = http.upload("full", course.bob, REFERENCE, "reference_lm.py")
    assert status == 202, nxt
    after = graded(http, course.bob, nxt, worker)
    assert {c["id"]: c["status"] for c in after["checks"]} == {c: "pass" for c in FULL_CHECKS}, after["checks"]
    assert after["sandbox"]["weak"] is False, after["sandbox"]
    if backend == "process":
        assert after["sandbox"]["layers"] == list(FULL), after["sandbox"]
    assert host_traces(backend) == [], "left on the host by the first submission"
