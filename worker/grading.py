"""One grading: claim the submission in the store, run the judge with a heartbeat, store the result once."""
import functools
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.exc import DBAPIError

from grader import __version__
from grader.app import coursework, jobs
from grader.app.db import get_db
from grader.sandbox import Limits
from grader.sandbox.prestart import prestarted

log = logging.getLogger(__name__)
DB_TRIES = 5  # storing a finished report survives a database blip this long (2 s apart)


@dataclass
class Outcome:
    """What the job did: graded, a Skip reason, retry (with its delay), failed or superseded."""
    status: str
    retry_in_s: float | None = None
    detail: str = ""
    result_id: int | None = None


def judge_options(assignment: dict, backend: str | None, steps: dict | None = None):
    """The judge's Options for an assignment: `grader check`'s defaults unless the assignment or settings say else."""
    from grader.judge import Options  # torch: imported once before the pool forks (worker/__init__.py), not here
    options = Options(only=tuple(assignment.get("checks") or ()), limits=Limits(**(assignment.get("limits") or {})),
                      steps=dict(steps or {}))
    if assignment.get("seed") is not None:
        options.seed = assignment["seed"]
    if backend:
        options.backend = backend
    return options


def run_judge(data: bytes, name: str, options, on_event, prestart: bool = False) -> dict:
    """grader.judge.grade_bytes, the same call `grader check` makes; with prestart, in a sandbox started ahead."""
    from grader.judge import grade_bytes  # torch, as above
    sandbox = prestarted(options.backend) if prestart else None
    return grade_bytes(data, name, options, sandbox=sandbox, on_event=on_event)


def infrastructure_problem(report: dict) -> str | None:
    """A report that says the sandbox never came up: no student code ran, so it is ours to retry."""
    env = report.get("environment")
    if env is None or env.get("torch") is not None:
        return None  # no stages planned, or the harness said hello (student failures are results)
    killed = (report.get("sandbox") or {}).get("killed")
    return "the sandbox did not start (the harness never reported)" + (f": {killed}" if killed else "")


class Heartbeat:
    """Refreshes the claim's heartbeat every interval and writes the check in progress and the verdicts decided so
    far as they change (a beat with nothing new writes no JSON)."""

    def __init__(self, db, claim: jobs.Claim, interval_s: float):
        self.db, self.claim, self.interval_s = db, claim, interval_s
        self.check: str | None = None
        self.verdicts: list = []  # the judge's verdict events so far (check result dicts)
        self.unsaved = False  # verdicts came since the last write
        self.lock = threading.Lock()
        self.lost = False
        self.wake, self.stopped = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"heartbeat-{claim.submission_id}", daemon=True)

    def start(self) -> "Heartbeat":
        self.thread.start()
        return self

    def on_event(self, header: dict) -> None:
        """The judge's live events: a stage_start frame names the check (stage key 'check.part'); a verdict is a
        check decided (grader/live.py), stored at once as the submission's partial result."""
        if header.get("type") == "verdict" and isinstance(header.get("check"), dict):
            with self.lock:
                self.verdicts.append(header["check"])
                self.unsaved = True
            self.wake.set()
        elif header.get("type") == "stage_start":
            check = str(header.get("stage", "")).split(".")[0]
            if check != self.check:
                self.check = check
                self.wake.set()

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.wake.clear()  # before reading what to write: an event from now on wakes the next wait
            partial = None
            try:
                with self.lock:
                    partial, self.unsaved = (list(self.verdicts) if self.unsaved else None), False
                with self.db.Session() as s:
                    if not jobs.heartbeat(s, self.claim, self.check, partial) and not self.lost:
                        self.lost = True
                        log.warning("submission %s: claim taken over by another attempt", self.claim.submission_id)
            except Exception as exc:  # a missed beat is survivable; the lease is several beats long
                log.warning("heartbeat failed: %s", exc)
                if partial is not None:
                    with self.lock:
                        self.unsaved = True  # write the verdicts with the next beat
            self.wake.wait(self.interval_s)

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()
        self.thread.join(timeout=10)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def grade(app, submission_id: int, task_id: str | None = None, judge=None) -> Outcome:
    """Grade one submission at most once per grading request; safe to call for any message, any number of times."""
    cfg, db = app.config, get_db(app)
    judge = judge or functools.partial(run_judge, prestart=bool(cfg.get("SANDBOX_PRESTART", True)))
    with db.Session() as s:
        c = jobs.claim(s, submission_id, worker_name(), task_id, cfg["LEASE_S"], cfg["MAX_ATTEMPTS"])
    if isinstance(c, jobs.Skip):
        log.info("submission %s: nothing to do (%s)", submission_id, c.reason)
        return Outcome(c.reason)
    log.info("submission %s: grading request %s, attempt %s", submission_id, c.request, c.number)
    options = judge_options(c.assignment, cfg["SANDBOX_BACKEND"], cfg.get("TRAINING_STEPS"))
    beat = Heartbeat(db, c, cfg["HEARTBEAT_S"]).start()
    report, problem = None, None
    try:
        report = judge(c.content, c.filename, options, beat.on_event)
        problem = infrastructure_problem(report)
    except SoftTimeLimitExceeded:  # the sandbox went with it (the judge closes it on the way out)
        log.warning("submission %s: stopped by the task's time limit", submission_id)
        problem = (f"the grading ran past the task's time limit ({cfg['TASK_SOFT_TIME_LIMIT_S']:g} s, "
                   f"TASK_SOFT_TIME_LIMIT_S) and was stopped")
    except Exception as exc:  # the judge turns student failures into results; anything raised is ours
        log.exception("submission %s: grading raised", submission_id)
        problem = f"{type(exc).__name__}: {exc}"[:2000]
    except BaseException as exc:  # SystemExit, KeyboardInterrupt (a worker shutting down): release, then re-raise
        beat.stop()
        stopped = f"{type(exc).__name__}: the job was stopped"
        _with_db_retries(lambda: _release(db, c, stopped, 0.0, cfg))
        raise
    finally:
        beat.stop()
    if problem is not None:
        delay = jobs.backoff_s(c.number, cfg["RETRY_BACKOFF_S"])
        status = _with_db_retries(lambda: _release(db, c, problem, delay, cfg))
        log.warning("submission %s: infrastructure failure (%s): %s", submission_id, status, problem)
        return Outcome(status, delay if status == "retry" else None, problem)
    stored = {"seed": options.seed, "only": list(options.only), "limits": options.limits.to_dict(),
              "backend": options.backend}
    result_id = _with_db_retries(lambda: _store(db, c, report, stored, __version__))
    if result_id is None:
        return Outcome("superseded")
    return Outcome("graded", result_id=result_id)


def _release(db, c, problem, delay, cfg) -> str:
    with db.Session() as s:
        return jobs.release(s, c, problem, delay, cfg["MAX_ATTEMPTS"])


def _store(db, c: jobs.Claim, report: dict, options: dict, version: str) -> int | None:
    """The result (exactly once, fenced by the claim) and its score under the current rubric, visible together: a
    poll that sees `done` finds the score too (no moment without it)."""
    def score(s, result) -> None:
        try:
            with s.begin_nested():  # a savepoint: a rubric problem rolls back the score only, never the result
                coursework.score_result(s, result)
        except Exception:  # `rescore` fills the score in later
            log.exception("submission %s: scoring failed; the result is stored without a score", c.submission_id)

    with db.Session() as s:
        result = jobs.finish(s, c, report, options, version, before_commit=score)
        return None if result is None else result.id


def _with_db_retries(fn):
    """Run fn, retrying while the database is unreachable (a restart, a failover)."""
    for attempt in range(DB_TRIES):
        try:
            return fn()
        except DBAPIError as exc:
            if attempt == DB_TRIES - 1 or not exc.connection_invalidated and "connect" not in str(exc).lower():
                raise
            log.warning("database unavailable (%s); retrying", exc.__class__.__name__)
            time.sleep(2)
