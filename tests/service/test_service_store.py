"""The store's grading state machine, on SQLite and PostgreSQL: exactly one result whatever the broker does."""
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from grader.app import accounts, jobs, store
from grader.app.db import get_db
from grader.app.models import Attempt, Result, Submission, utcnow
from worker import grading

from .svc_helpers import fake_report, judge_returning

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_bytes()
PASS = fake_report({"split_heads": "pass", "rope": "pass"})


def submit(app, data=REFERENCE, student="alice", slug="cap") -> int:
    with app.app_context(), get_db(app).session() as s:
        up = store.create_submission(s, store.get_assignment(s, slug), accounts.get_student(s, student), data, "sub.py")
        return up.submission.id


def claim(app, sid, worker="w1"):
    with get_db(app).Session() as s:
        return jobs.claim(s, sid, worker, None, app.config["LEASE_S"], app.config["MAX_ATTEMPTS"])


def row(app, sid) -> Submission:
    with get_db(app).Session() as s:
        return s.get(Submission, sid)


def count(app, model, sid) -> int:
    with get_db(app).Session() as s:
        return s.scalar(select(func.count()).select_from(model).where(model.submission_id == sid))


def age_heartbeat(app, sid, seconds=60):
    """Make the running attempt look dead (its heartbeat stopped `seconds` ago)."""
    with get_db(app).session() as s:
        s.execute(update(Submission).where(Submission.id == sid)
                  .values(heartbeat_at=utcnow() - timedelta(seconds=seconds)))


def test_a_claim_is_exclusive_and_a_done_submission_is_never_claimed_again(app, course):
    sid = submit(app)
    first = claim(app, sid)
    assert isinstance(first, jobs.Claim) and first.number == 1
    assert claim(app, sid) == jobs.Skip("busy"), "a second message for a running submission must not grade it"
    with get_db(app).Session() as s:
        assert jobs.finish(s, first, PASS, {}, "t") is not None
    assert claim(app, sid) == jobs.Skip("done"), "a redelivered message for a done submission must be a no-op"
    assert count(app, Result, sid) == 1


def test_racing_claims_give_exactly_one_winner(app, course):
    sid = submit(app)
    got, barrier = [], threading.Barrier(6)

    def race(n):
        barrier.wait()
        got.append(claim(app, sid, f"w{n}"))
    threads = [threading.Thread(target=race, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [c for c in got if isinstance(c, jobs.Claim)]
    assert len(winners) == 1, f"{len(winners)} of 6 concurrent claims won: {got}"


def test_a_dead_workers_submission_is_claimed_again_and_its_late_result_is_refused(app, course):
    sid = submit(app)
    old = claim(app, sid, "dead")
    age_heartbeat(app, sid)
    new = claim(app, sid, "alive")
    assert isinstance(new, jobs.Claim) and new.number == 2
    with get_db(app).Session() as s:
        assert jobs.finish(s, new, PASS, {}, "t") is not None
    with get_db(app).Session() as s:
        assert jobs.finish(s, old, PASS, {}, "t") is None, "the superseded attempt must not store a result"
    assert count(app, Result, sid) == 1
    with get_db(app).Session() as s:
        outcomes = [a.outcome for a in store.attempts_of(s, s.get(Submission, sid))]
    assert outcomes == ["superseded", "graded"] or outcomes == ["lost", "graded"], outcomes


def test_finishing_twice_with_one_claim_stores_one_result(app, course):
    sid = submit(app)
    c = claim(app, sid)
    with get_db(app).Session() as s:
        assert jobs.finish(s, c, PASS, {}, "t") is not None
    with get_db(app).Session() as s:
        assert jobs.finish(s, c, PASS, {}, "t") is None
    assert count(app, Result, sid) == 1


def test_the_unique_constraint_backs_up_the_claim(app, course):
    sid = submit(app)
    with get_db(app).session() as s:
        s.add(Result(submission_id=sid, request=1, attempt=1, report=PASS, options={}))
    c = claim(app, sid)
    with get_db(app).Session() as s:
        assert jobs.finish(s, c, PASS, {}, "t") is None, "a second result for one request must be refused"
    assert count(app, Result, sid) == 1


def test_an_infrastructure_failure_is_retried_then_gives_up(app, course):
    sid = submit(app)

    def broken(data, name, options, on_event):
        raise OSError("the sandbox could not start: no such file")
    for attempt in range(1, app.config["MAX_ATTEMPTS"] + 1):
        out = grading.grade(app, sid, judge=broken)
        expected = "retry" if attempt < app.config["MAX_ATTEMPTS"] else "failed"
        assert out.status == expected, f"attempt {attempt}: {out}"
        if expected == "retry":
            assert out.retry_in_s == jobs.backoff_s(attempt, app.config["RETRY_BACKOFF_S"])
            assert row(app, sid).status == "queued" and row(app, sid).not_before is not None
    sub = row(app, sid)
    assert sub.status == "failed" and "no such file" in sub.error
    assert count(app, Result, sid) == 0
    assert grading.grade(app, sid, judge=broken).status == "failed", "a failed submission is left alone"


def test_a_sandbox_that_never_started_is_infrastructure_not_the_students_fault(app, course):
    sid = submit(app)
    out = grading.grade(app, sid, judge=judge_returning(fake_report({"split_heads": "crash"}, started=False)))
    assert out.status == "retry", out
    assert count(app, Result, sid) == 0


def test_a_students_failure_is_a_result_not_a_retry(app, course):
    sid = submit(app)
    report = fake_report({"split_heads": "error", "rope": "timeout"})
    out = grading.grade(app, sid, judge=judge_returning(report))
    assert out.status == "graded", out
    assert row(app, sid).status == "done"
    assert count(app, Result, sid) == 1


def test_the_heartbeat_reports_the_check_in_progress(app, course):
    sid = submit(app)
    seen = {}

    def slow(data, name, options, on_event):
        on_event({"type": "stage_start", "stage": "rope.norms"})
        time.sleep(0.6)
        seen["current"] = row(app, sid).current_check
        return PASS
    assert grading.grade(app, sid, judge=slow).status == "graded"
    assert seen["current"] == "rope"
    assert row(app, sid).current_check is None


def test_the_sweeper_requeues_dead_and_lost_jobs_only(app, course):
    lost, present, dead, waiting = (submit(app, REFERENCE + f"\n# {n}\n".encode(), "alice" if n % 2 else "bob")
                                    for n in range(4))
    claim(app, dead)
    age_heartbeat(app, dead)
    with get_db(app).session() as s:
        old = utcnow() - timedelta(seconds=120)
        s.execute(update(Submission).values(enqueued_at=old))
        s.execute(update(Submission).where(Submission.id == waiting)
                  .values(not_before=utcnow() + timedelta(seconds=60)))
        in_broker = {s.get(Submission, present).task_id}
    with get_db(app).Session() as s:
        resend = dict(jobs.sweep(s, app.config["LEASE_S"], 30, in_broker, app.config["MAX_ATTEMPTS"]))
    assert set(resend) == {lost, dead}, f"resent {sorted(resend)}; lost={lost}, dead={dead}"
    assert row(app, dead).status == "queued"
    assert row(app, lost).task_id == resend[lost], "a resent job gets a new task id"
    with get_db(app).Session() as s:
        assert [a.outcome for a in store.attempts_of(s, s.get(Submission, dead))] == ["lost"]


def test_queue_position_counts_the_queued_submissions_sent_before(app, course):
    ids = [submit(app, REFERENCE + f"\n# {n}\n".encode(), ("alice", "bob")[n % 2]) for n in range(3)]
    with get_db(app).Session() as s:
        assert [store.queue_position(s, s.get(Submission, i)) for i in ids] == [1, 2, 3]
    claim(app, ids[0])
    with get_db(app).Session() as s:
        assert [store.queue_position(s, s.get(Submission, i)) for i in ids] == [None, 1, 2]


def test_regrade_keeps_the_old_result(app, course):
    sid = submit(app)
    assert grading.grade(app, sid, judge=judge_returning(PASS)).status == "graded"
    with get_db(app).session() as s:
        store.request_regrade(s, s.get(Submission, sid))
    with pytest.raises(store.Conflict), get_db(app).session() as s:
        store.request_regrade(s, s.get(Submission, sid))
    worse = fake_report({"split_heads": "fail", "rope": "pass"})
    assert grading.grade(app, sid, judge=judge_returning(worse)).status == "graded"
    with get_db(app).Session() as s:
        results = store.results_of(s, s.get(Submission, sid))
    assert [(r.request, r.report["checks"][0]["status"]) for r in results] == [(1, "pass"), (2, "fail")]
    assert count(app, Attempt, sid) == 2


def test_a_page_never_shows_a_finished_result_as_still_running(app, course):
    """Read skew: the page read the submission (running), the worker then committed the result and 'done'
    together, and the page read the result: its status box said 'Running' beside the result (a browser test saw
    it). result_view reads the status again when it finds the current request's result."""
    from grader.app.pages.results import result_view, status_json
    sid = submit(app)
    c = claim(app, sid)
    with app.test_request_context(), get_db(app).Session() as page:
        sub = page.get(Submission, sid)
        assert sub.status == "running"
        with get_db(app).Session() as worker:
            assert jobs.finish(worker, c, PASS, {}, "t") is not None
        view = result_view(page, sub, for_student=True)
        assert view["result"] is not None and view["current"], "the result shown as the previous one"
        assert status_json(page, sub)["text"] == "Graded"
