"""The task time limit, for real: a grading that outlives it is stopped with its sandbox, retried, and ends failed
with the reason; the worker goes on grading. A real `grader worker` (beat included), PostgreSQL, a Redis of our own."""
import os
import time

import pytest
from sqlalchemy import func, select

from grader.app.db import get_db
from grader.app.models import Attempt, Result, Submission
from .svc_cluster import Http, LiveServer, Worker, cluster_app, wait_for
from .svc_helpers import make_course
from .test_service_e2e import REFERENCE, slow

pytestmark = pytest.mark.slow
# The limit is far below the check's own 30 s budget, so the task limit, not the sandbox, stops the grading.
SETTINGS = {"TASK_SOFT_TIME_LIMIT_S": 4, "TASK_TIME_LIMIT_S": 12, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF_S": 1,
            "HEARTBEAT_S": 1, "LEASE_S": 10, "SWEEP_INTERVAL_S": 1, "REQUEUE_AFTER_S": 2, "ENFORCE_ATTEMPTS": False,
            "PUBLISH_RETRIES": 1}


def sandboxes() -> set[int]:
    """The sandboxes on this machine: the topmost process of each tree running the harness (bwrap, its init, the
    harness and a check's child all carry harness/main.py in their command line). A worker keeps one waiting."""
    running = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"harness/main.py" not in fh.read():
                    continue
            with open(f"/proc/{pid}/stat") as fh:
                running[int(pid)] = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return {pid for pid, parent in running.items() if parent not in running}


def test_a_grading_past_the_task_time_limit_is_stopped_retried_and_ends_failed(pg_url, tmp_path):
    app, redis, env = cluster_app(pg_url, tmp_path, SETTINGS)
    course = make_course(app, "cap", ["split_heads"])
    server = LiveServer(app).start()
    worker = Worker("limit", env, tmp_path, beat=True)
    before = sandboxes()
    try:
        worker.start()
        http = Http(server.url)
        status, sub = http.upload("cap", course.alice, slow(60, "past the limit"), "slow.py")
        assert status == 202, sub

        def settled():
            with get_db(app).Session() as s:
                row = s.get(Submission, sub["id"])
                return row if row.status in ("done", "failed") else None
        row = wait_for(settled, 120, 0.5, "the slow submission to end")
        with get_db(app).Session() as s:
            attempts = [a.outcome for a in s.scalars(select(Attempt).where(Attempt.submission_id == sub["id"])
                                                     .order_by(Attempt.number))]
            results = s.scalar(select(func.count()).select_from(Result).where(Result.submission_id == sub["id"]))
        assert row.status == "failed" and "past the task's time limit (4 s" in (row.error or ""), (row.status, row.error)
        assert len(attempts) == SETTINGS["MAX_ATTEMPTS"] and results == 0, (attempts, results)
        # Each stopped grading's sandbox went with it: what is left is the one waiting for the next job.
        wait_for(lambda: len(sandboxes() - before) <= 1, 20, 0.5, "stopped sandboxes to be gone")

        status, ok = http.upload("cap", course.alice, REFERENCE, "reference.py")
        assert status == 202, ok
        done = wait_for(lambda: http.get(ok["links"]["self"], course.alice)[1]["status"] == "done", 60, 0.5,
                        "the next submission to be graded")
        assert done, "the worker still grades after stopping a grading"
    finally:
        worker.kill()
        server.stop()
        redis.stop()
        get_db(app).engine.dispose()
