"""Helpers for the service tests: apps on a store, a course with tokens, stand-in judge reports."""
import os
from dataclasses import dataclass

from sqlalchemy import text

from tests.ci import missing

PG_ADMIN = os.environ.get("GRADER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
TABLES = ("scores, results, attempts, submissions, tokens, students, assignments, rubrics, extensions, feedback_rules, "
          "line_comments")
FAST_CHECKS = ["split_heads", "attention_sdpa", "rope"]


def unavailable(reason: str):
    """Skip on a laptop without the service; in CI (where it is started) that is a failure."""
    missing(reason)


def make_app(url: str, tmp_path, **settings):
    """The app on `url` with an in-memory broker (no worker): what the store and API tests need."""
    from grader.app import create_app
    config = {"DATABASE_URL": url, "BROKER_URL": "memory://", "SUBMISSIONS_DIR": str(tmp_path / "archive"),
              "SECRET_KEY": "test", "HEARTBEAT_S": 0.2, "LEASE_S": 2.0, "RETRY_BACKOFF_S": 1.0}
    config.update(settings)
    return create_app(config)


def empty_tables(app) -> None:
    """A clean PostgreSQL database between tests (the schema stays)."""
    from grader.app.db import get_db
    with get_db(app).engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE"))


@dataclass
class Course:
    """An assignment, two students and their tokens."""
    slug: str
    instructor: str
    alice: str
    bob: str

    @staticmethod
    def auth(token: str) -> dict:
        return {"Authorization": f"Bearer {token}"}


def make_course(app, slug="cap", checks=FAST_CHECKS, **fields) -> Course:
    """Create the assignment, the students alice and bob, and tokens for them and an instructor."""
    from grader.app import accounts, store
    from grader.app.accounts import issue_token
    from grader.app.db import get_db
    with app.app_context(), get_db(app).session() as s:
        store.create_assignment(s, slug, title="Capstone", checks=list(checks), **fields)
        tokens = {"instructor": issue_token(s, "instructor")[1]}
        for name in ("alice", "bob"):
            try:
                student = accounts.get_student(s, name)
            except store.NotFound:
                student = accounts.add_student(s, name, name.title())
            tokens[name] = issue_token(s, "student", student)[1]
    return Course(slug, tokens["instructor"], tokens["alice"], tokens["bob"])


def fake_report(statuses: dict, track: str = "lm", started: bool = True) -> dict:
    """A judge report in grade_bytes's shape; started=False is a sandbox that never said hello."""
    checks = [{"id": cid, "status": st, "message": f"{cid}: {st}", "metrics": {}, "details": [], "duration_s": 0.01,
               "stdout": ""} for cid, st in statuses.items()]
    summary = {}
    for c in checks:
        summary[c["status"]] = summary.get(c["status"], 0) + 1
    return {"grader": {"version": "0.1.0", "contract": 1}, "seed": 20261129,
            "submission": {"name": "submission.py", "bytes": 10, "sha256": "0" * 64, "track": track},
            "checks": checks, "summary": summary, "environment": {"torch": "2.13.0" if started else None},
            "sandbox": {"backend": "process", "killed": None}, "timings": {"total_s": 0.1}}


def real_judge():
    """The worker's own judge and sandbox, each grading in a sandbox started for it rather than ahead."""
    import functools
    from worker.grading import run_judge
    return functools.partial(run_judge, prestart=False)


def judge_returning(report: dict):
    """A stand-in for the judge (the real one is exercised by the end-to-end tests)."""
    def judge(data, name, options, on_event):
        on_event({"type": "stage_start", "stage": f"{report['checks'][0]['id']}.main"})
        return report
    return judge
