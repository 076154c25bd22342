"""End to end: the web app over HTTP, PostgreSQL, a Redis of our own and real `grader worker` processes.

Each test leaves the cluster running for the next; the order is the order below.
"""
import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import func, select

from grader.app import accounts, store
from grader.app.accounts import issue_token
from grader.registry import check_ids
from grader.app.db import get_db
from grader.app.models import Attempt, Result, Submission
from .svc_cluster import BIN, Http, LiveServer, Worker, cluster_app, wait_for
from .svc_helpers import make_course

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
REFERENCE_PATH = ROOT / "submissions" / "reference_lm.py"
REFERENCE = REFERENCE_PATH.read_bytes()
ARTIFACTS = ROOT / "tests" / "artifacts"
# Every correctness check; training and evaluation take long and add nothing to what the service does.
E2E_CHECKS = [c for c in check_ids() if c not in ("training", "evaluation")]
BURST = int(os.environ.get("GRADER_TEST_BURST", "200"))
BURST_STUDENTS = 20
SETTINGS = {"HEARTBEAT_S": 1, "LEASE_S": 10, "SWEEP_INTERVAL_S": 2, "REQUEUE_AFTER_S": 4, "RETRY_BACKOFF_S": 1,
            "VISIBILITY_TIMEOUT_S": 12, "RESTORE_INTERVAL_S": 2, "ENFORCE_ATTEMPTS": False, "PUBLISH_RETRIES": 1}


def slow(seconds: float, tag: str) -> bytes:
    """The reference, with split_heads sleeping once in the split_heads check (D=24 there; the models use 32)."""
    wrapper = (f"\n\n_split_heads = split_heads\n_slept = []\n\n\ndef split_heads(x, num_heads):\n"
               f"    if x.shape[-1] == 24 and not _slept:\n"
               f"        import time\n        _slept.append(time.sleep({seconds}))\n"
               f"    return _split_heads(x, num_heads)\n# {tag}\n")
    return REFERENCE + wrapper.encode()


class Cluster:
    def __init__(self, app, http, redis, workers, course, burst_tokens, workdir):
        self.app, self.http, self.redis, self.workers = app, http, redis, workers
        self.course, self.burst_tokens, self.workdir = course, burst_tokens, workdir

    def rows(self, ids) -> dict[int, Submission]:
        with get_db(self.app).Session() as s:
            return {sub.id: sub for sub in s.scalars(select(Submission).where(Submission.id.in_(list(ids))))}

    def wait_done(self, ids, timeout: float) -> dict[int, Submission]:
        ids = list(ids)

        def all_done():
            rows = self.rows(ids)
            return rows if all(r.status in ("done", "failed") for r in rows.values()) else None
        try:
            return wait_for(all_done, timeout, 0.5, f"{len(ids)} submission(s) to be graded")
        except TimeoutError:
            counts = {}
            for r in self.rows(ids).values():
                counts[r.status] = counts.get(r.status, 0) + 1
            raise AssertionError(f"not all graded in {timeout:.0f} s: {counts}; logs in {self.workdir}") from None

    def results_per_submission(self, ids) -> dict[int, int]:
        with get_db(self.app).Session() as s:
            rows = s.execute(select(Result.submission_id, func.count()).where(Result.submission_id.in_(list(ids)))
                             .group_by(Result.submission_id)).all()
        return {sid: 0 for sid in ids} | dict(rows)

    def attempts(self, sid) -> list[str]:
        with get_db(self.app).Session() as s:
            return [a.outcome for a in s.scalars(select(Attempt).where(Attempt.submission_id == sid)
                                                 .order_by(Attempt.number))]

    def worker_of(self, sid) -> Worker:
        pid = int(self.rows([sid])[sid].worker.rsplit(":", 1)[1])
        return next(w for w in self.workers.values() if w.owns(pid))

    def log(self) -> str:
        return "".join(w.text() for w in self.workers.values())


@pytest.fixture(scope="module")
def cluster(pg_url, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("cluster")
    app, redis, env = cluster_app(pg_url, workdir, SETTINGS, secret_key="test")
    course = make_course(app, "cap", E2E_CHECKS)
    with get_db(app).session() as s:
        store.create_assignment(s, "burst", title="Burst", checks=["split_heads"])
        burst_tokens = [issue_token(s, "student", accounts.add_student(s, f"s{n:02d}"))[1] for n in range(BURST_STUDENTS)]
    server = LiveServer(app).start()
    workers = {"a": Worker("a", env, workdir, beat=True), "b": Worker("b", env, workdir)}
    try:
        for w in workers.values():
            w.start()
        yield Cluster(app, Http(server.url), redis, workers, course, burst_tokens, workdir)
    finally:
        for w in workers.values():
            w.kill()
        server.stop()
        redis.stop()
        get_db(app).engine.dispose()


def deliveries(log: str, sid: int) -> int:
    """How many times a job for the submission reached a worker (graded or found nothing to do)."""
    return sum(1 for line in log.splitlines()
               if f"submission {sid}: grading request" in line or f"submission {sid}: nothing to do" in line)


def comparable(report: dict) -> dict:
    """A report without what differs between two runs of the same grading: timings."""
    out = {k: v for k, v in report.items() if k not in ("timings", "score")}
    out["checks"] = [{k: v for k, v in c.items() if k != "duration_s"} for c in report["checks"]]
    return out


def test_an_upload_is_graded_live_and_identical_to_grader_check(cluster):
    status, sub = cluster.http.upload("cap", cluster.course.alice, REFERENCE, REFERENCE_PATH.name)
    assert status == 202 and sub["status"] == "queued", sub
    seen = [(sub["status"], None)]
    deadline = time.monotonic() + 120
    while seen[-1][0] not in ("done", "failed") and time.monotonic() < deadline:
        _, now = cluster.http.get(sub["links"]["self"], cluster.course.alice)
        state = (now["status"], (now["progress"] or {}).get("check"))
        if state != seen[-1]:
            seen.append(state)
        time.sleep(0.05)
    statuses = [s for s, _ in seen]
    assert statuses[-1] == "done", seen
    assert statuses == sorted(statuses, key=["queued", "running", "done"].index), f"status went backwards: {seen}"
    assert "running" in statuses and any(check in E2E_CHECKS for _, check in seen), \
        f"the API should report the check in progress while running: {seen}"

    _, result = cluster.http.get(sub["links"]["result"], cluster.course.instructor)
    local = subprocess.run([str(BIN / "grader"), "check", str(REFERENCE_PATH), "--json", "--only",
                            ",".join(E2E_CHECKS)], capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    expected = json.loads(local.stdout)
    assert comparable(result["report"]) == comparable(expected), "the service graded differently from grader check"
    if "late_penalty" not in result["score"] and expected.get("score"):
        assert result["score"] == expected["score"], "the same report must give the same points"
    _, student = cluster.http.get(sub["links"]["result"], cluster.course.alice)
    assert "seed" not in student["report"], "the judge's seed is never shown to students"


def test_a_student_cannot_read_another_students_work(cluster):
    _, mine = cluster.http.get("/api/v1/assignments/cap/submissions", cluster.course.alice)
    sid = mine[0]["id"]
    for path in (f"/api/v1/submissions/{sid}", f"/api/v1/submissions/{sid}/result",
                 f"/api/v1/submissions/{sid}/results"):
        status, body = cluster.http.get(path, cluster.course.bob)
        assert status == 404 and body["error"] == "not_found", f"bob read alice's {path}: {status} {body}"
        assert cluster.http.get(path, cluster.course.alice)[0] == 200
    assert cluster.http.get("/api/v1/assignments/cap/submissions", cluster.course.bob) == (200, [])


def test_a_worker_killed_mid_grade_loses_nothing_and_grades_once(cluster):
    started = time.monotonic()
    status, sub = cluster.http.upload("cap", cluster.course.bob, slow(4, "kill"), "slow.py")
    assert status == 202
    sid = sub["id"]
    wait_for(lambda: cluster.rows([sid])[sid].current_check == "split_heads", 60, 0.1, "the grading to be mid-check")
    first_job = cluster.rows([sid])[sid].task_id
    victim = cluster.worker_of(sid)
    victim.kill()
    killed = time.monotonic()
    unacked = cluster.redis.client().hlen("unacked")
    assert unacked >= 1, "acks_late: the killed worker's job must still be unacknowledged in Redis"
    victim.start()
    rows = cluster.wait_done([sid], 120)
    done = time.monotonic()
    assert rows[sid].status == "done"
    assert cluster.results_per_submission([sid]) == {sid: 1}
    assert cluster.attempts(sid) == ["lost", "graded"], cluster.attempts(sid)
    _, result = cluster.http.get(f"/api/v1/submissions/{sid}/result", cluster.course.bob)
    assert {c["id"]: c["status"] for c in result["report"]["checks"]}["split_heads"] == "pass"
    # Redis hands the killed worker's unacknowledged job out again after the visibility timeout, and the
    # sweeper sends a job of its own once the heartbeat is stale: whichever comes first grades, the other
    # finds the submission taken. Wait for the redelivery and for Redis to hold nothing more, then count.
    received = f"grade_submission[{first_job}] received"
    wait_for(lambda: cluster.log().count(received) >= 2, 60, 0.5, "Redis to redeliver the killed worker's job")
    redelivered = time.monotonic()
    r = cluster.redis.client()
    wait_for(lambda: r.llen("grader") == 0 and r.hlen("unacked") == 0, 60, 0.5, "Redis to hold no more jobs")
    assert cluster.results_per_submission([sid]) == {sid: 1}, "the redelivered job must not grade again"
    assert cluster.attempts(sid) == ["lost", "graded"]
    facts = {"mid_grade_after_s": round(killed - started, 1), "unacked_after_kill": unacked,
             "graded_after_kill_s": round(done - killed, 1),
             "redelivered_after_kill_s": round(redelivered - killed, 1),
             "deliveries": deliveries(cluster.log(), sid), "attempts": cluster.attempts(sid)}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "service_kill.json").write_text(json.dumps(facts, indent=2))
    print(f"\nkill: {facts}")


def test_a_redis_restart_with_jobs_queued_loses_none(cluster):
    r = cluster.redis.client()
    busy = [cluster.http.upload("cap", tok, slow(4, f"busy{n}"), "busy.py")[1]["id"]
            for n, tok in enumerate((cluster.course.alice, cluster.course.bob))]
    wait_for(lambda: all(row.status == "running" for row in cluster.rows(busy).values()), 60, 0.1,
             "both workers to be busy")
    waiting = [cluster.http.upload("burst", cluster.burst_tokens[n], REFERENCE + f"# redis {n}\n".encode(),
                                   "r.py")[1]["id"] for n in range(6)]
    queued = r.llen("grader")
    assert queued >= 4, "the jobs should be waiting in Redis when it restarts"
    started = time.monotonic()
    cluster.redis.restart()
    assert cluster.redis.client().llen("grader") == 0, "a restarted Redis (no persistence) has lost the queue"
    ids = busy + waiting
    rows = cluster.wait_done(ids, 180)
    assert {r.status for r in rows.values()} == {"done"}
    assert cluster.results_per_submission(ids) == {sid: 1 for sid in ids}, "one result each"
    # a result row is unique per request, so a second grading would show only as a second attempt
    with get_db(cluster.app).Session() as s:
        outcomes = s.execute(select(Attempt.submission_id, Attempt.outcome).where(Attempt.submission_id.in_(ids))).all()
    graded = {sid: [o for i, o in outcomes if i == sid] for sid in ids}
    assert graded == {sid: ["graded"] for sid in ids}, f"each graded exactly once: {graded}"
    assert "sweeper: sent" in cluster.log(), "the sweeper should have sent the lost jobs again"
    facts = {"jobs_in_redis_at_restart": queued, "running_at_restart": len(busy),
             "all_graded_after_restart_s": round(time.monotonic() - started, 1),
             "results": sum(cluster.results_per_submission(ids).values())}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "service_redis_restart.json").write_text(json.dumps(facts, indent=2))
    print(f"\nredis restart: {facts}")


def test_a_burst_of_uploads_is_all_graded_once(cluster):
    tokens = cluster.burst_tokens
    files = [(tokens[n % len(tokens)], REFERENCE + f"# burst {n}\n".encode()) for n in range(BURST)]
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda f: cluster.http.upload("burst", f[0], f[1], "burst.py"), files))
    uploaded = time.monotonic() - started
    assert [status for status, _ in answers] == [202] * BURST, {s for s, _ in answers}
    ids = [body["id"] for _, body in answers]
    assert len(set(ids)) == BURST
    rows = cluster.wait_done(ids, 600)
    graded = time.monotonic() - started
    per_sub = cluster.results_per_submission(ids)
    assert {r.status for r in rows.values()} == {"done"}
    assert set(per_sub.values()) == {1}, f"missing or duplicated results: {[s for s, n in per_sub.items() if n != 1]}"
    with get_db(cluster.app).Session() as s:
        results = s.scalars(select(Result).where(Result.submission_id.in_(ids))).all()
        attempts = s.scalar(select(func.count()).select_from(Attempt).where(Attempt.submission_id.in_(ids)))
    assert all(r.report["checks"][0]["status"] == "pass" for r in results)
    waits = sorted((r.finished_at - r.created_at).total_seconds() for r in rows.values())
    by_worker = {}
    for r in rows.values():
        by_worker[r.worker.rsplit(":", 1)[1]] = by_worker.get(r.worker.rsplit(":", 1)[1], 0) + 1
    facts = {"uploads": BURST, "upload_s": round(uploaded, 1), "all_graded_s": round(graded, 1),
             "per_submission_s": round(graded / BURST, 2), "wait_median_s": round(waits[len(waits) // 2], 1),
             "wait_max_s": round(waits[-1], 1), "attempts": attempts, "results": len(results),
             "by_worker_process": by_worker}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "service_burst.json").write_text(json.dumps(facts, indent=2))
    print(f"\nburst: {facts}")
    assert attempts == BURST, f"every submission should be graded on its first attempt: {facts}"
    assert len(by_worker) >= 2, f"both worker processes should share the burst: {facts}"
