"""First verdicts while training runs, on a real cluster: the web app over HTTP on PostgreSQL, a Redis of our own and
a real `grader worker` (its sandbox started ahead, as in production). The reference, graded with training, shows its
correctness verdicts through GET /api/v1/submissions/ID/result while training still runs: a partial answer
(partial: true, status running, no training verdict) whose verdicts all pass and equal the final report's."""
import json
import time
from pathlib import Path

import pytest

from grader.app import store
from grader.app.db import get_db
from grader.registry import check_ids
from .svc_cluster import Http, LiveServer, Worker, cluster_app, wait_for
from .svc_helpers import make_course

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
REFERENCE_PATH = ROOT / "submissions" / "reference_lm.py"
ARTIFACT = ROOT / "tests" / "artifacts" / "service_first_verdicts.json"
LATE = ("training", "evaluation")  # they need the judge's training run
CORRECTNESS = [c for c in check_ids() if c not in LATE]
# The default HEARTBEAT_S (10): a verdict is written when it arrives, not at the next beat.
SETTINGS = {"ENFORCE_ATTEMPTS": False}


@pytest.fixture(scope="module")
def live(pg_url, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("partial")
    app, redis, env = cluster_app(pg_url, workdir, SETTINGS, secret_key="test")
    course = make_course(app, "cap", list(check_ids()))  # every check, training and evaluation included
    with get_db(app).session() as s:
        store.create_assignment(s, "warm", title="Warm-up", checks=["split_heads"])
    server = LiveServer(app).start()
    worker = Worker("a", env, workdir)
    try:
        worker.start()
        yield Http(server.url), course, worker
    finally:
        worker.kill()
        server.stop()
        redis.stop()
        get_db(app).engine.dispose()


def test_the_correctness_verdicts_are_readable_while_training_runs(live):
    http, course, worker = live
    # one job first: the worker's first-job costs are paid, then it idles while its next sandbox starts ahead
    status, warm = http.upload("warm", course.bob, REFERENCE_PATH.read_bytes(), "warm.py")
    assert status == 202, warm
    wait_for(lambda: http.get(warm["links"]["self"], course.bob)[1]["status"] == "done", 300, 0.5, "the warm-up")
    time.sleep(10)  # idle: the sandbox started ahead has imported torch

    started = time.monotonic()
    status, sub = http.upload("cap", course.alice, REFERENCE_PATH.read_bytes(), REFERENCE_PATH.name)
    assert status == 202, sub
    answers = []

    def first_verdicts():
        code, body = http.get(sub["links"]["result"], course.alice)
        answers.append((round(time.monotonic() - started, 2), code, body.get("status"),
                        [c["id"] for c in (body.get("report") or {}).get("checks", [])]))
        if code == 200 and body.get("partial") is False:
            raise AssertionError(f"graded before any partial answer showed every correctness verdict: {answers}")
        ids = {c["id"] for c in body["report"]["checks"]} if code == 200 else set()
        return body if set(CORRECTNESS) <= ids else None
    partial = wait_for(first_verdicts, 300, 0.1, "the correctness verdicts")
    seconds = round(time.monotonic() - started, 2)
    print(f"\ncorrectness verdicts readable {seconds:.2f} s after the upload (idle service; goal: within 5 s)")

    assert partial["partial"] is True and partial["status"] == "running", partial
    assert partial["score"] is None, "no score until the result is stored"
    shown = {c["id"]: c for c in partial["report"]["checks"]}
    assert "training" not in shown and "training" in partial["pending"], "training is still running"
    assert {cid: shown[cid]["status"] for cid in CORRECTNESS} == {cid: "pass" for cid in CORRECTNESS}, shown
    assert "seed" not in partial["report"]

    done = wait_for(lambda: (lambda r: r if r[1].get("partial") is False else None)(
        http.get(sub["links"]["result"], course.alice)), 600, 1, "the result")[1]
    final = {c["id"]: c for c in done["report"]["checks"]}
    assert set(final) == set(check_ids()) and done["score"] is not None, worker.text()[-3000:]
    for cid, check in shown.items():
        assert check == final[cid], f"the partial verdict of {cid} differs from the final one"
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text(json.dumps({"first_verdicts_s": seconds, "polls": answers[-5:],
                                    "total_s": done["report"]["timings"]["total_s"]}, indent=2))
