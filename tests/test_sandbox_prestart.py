"""Sandboxes started ahead of their job (the process backend and the Prestarter a worker keeps).

What must hold: the verdicts are those of a cold start, the wall clock counts from the job's go, a
sandbox started ahead serves one job only, and one never used (other limits, a closed Prestarter, a
harness killed while waiting, a worker gone) leaves nothing behind.
"""
import os
import signal
import time

import pytest

from grader.checks import split_heads
from grader.checks.base import Context
from grader.configs import DEFAULT_SEED
from grader.judge import Options, grade_bytes, write_job
from grader.sandbox import Limits, make_sandbox
from grader.sandbox.prestart import Prestarter
from grader.sandbox.process import ProcessSandbox, uid_processes
from grader.source import read_source
from test_known_bad import KNOWN_BAD
from conftest import REFERENCES
from test_sandbox_support import leftovers

pytestmark = pytest.mark.slow
CORRECTNESS = Options(skip=("training", "evaluation"), backend="process")


def wait_for_hello(prepared) -> None:
    """Until the harness started ahead has imported torch and said hello."""
    assert prepared.wait_ready(60), f"the harness started ahead died or never said hello: {prepared.running.log_path.read_text()}"


def gone(uid: int, job_dir, timeout_s: float = 10.0) -> list[str]:
    """What a sandbox that never ran a job still holds once it had time to go: processes and its job directory."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [f"process {pid}" for pid in uid_processes(uid)] + ([f"job directory {job_dir}"] if job_dir.exists() else [])
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def verdicts(report: dict) -> list[tuple]:
    return [(c["id"], c["status"], c["message"]) for c in report["checks"]]


def one_stage_job():
    """split_heads' stages for the reference: a job that takes well under a second once torch is imported."""
    text = REFERENCES["lm"].read_text()
    return text, split_heads.plan(Context(DEFAULT_SEED, read_source(text.encode())))


@pytest.mark.parametrize("which", ["reference", "known_bad"])
def test_started_ahead_gives_the_verdicts_of_a_cold_start(which, tmp_path):
    path = REFERENCES["lm"] if which == "reference" else KNOWN_BAD.materialize(tmp_path)[0]
    data = path.read_bytes()
    cold = grade_bytes(data, path.name, CORRECTNESS)
    prestarter = Prestarter(make_sandbox("process"))
    try:
        grade_bytes(data, path.name, CORRECTNESS, sandbox=prestarter)  # its close starts the next one
        assert prestarter.wait_ready(60), "the next sandbox was not started ahead"
        warm = grade_bytes(data, path.name, CORRECTNESS, sandbox=prestarter)
    finally:
        prestarter.close()
    assert warm["timings"]["sandbox_ahead_s"] > warm["timings"]["torch_import_s"] > 0, warm["timings"]
    assert cold["timings"]["sandbox_ahead_s"] < 1, "a cold start overlaps only the writing of the job"
    assert verdicts(warm) == verdicts(cold)


def test_the_wall_clock_counts_from_the_go_not_from_the_start():
    text, stages = one_stage_job()
    prepared = ProcessSandbox().prepare(Limits())
    try:
        wait_for_hello(prepared)
        time.sleep(3)  # longer than the wall budget below: a clock started at the spawn would kill the job
        write_job(prepared.job_dir, text, stages, Options())
        run = prepared.run(wall_s=2.5)
    finally:
        prepared.close()
    assert run.killed is None, run.killed
    assert any(h.get("type") == "done" for h, _ in run.frames)
    assert run.ahead_s >= 3 and run.wall_s < 2.5


def test_a_sandbox_started_ahead_serves_one_job_only():
    text, stages = one_stage_job()
    prepared = ProcessSandbox().prepare(Limits())
    try:
        write_job(prepared.job_dir, text, stages, Options())
        first = prepared.run(wall_s=60)
        assert any(h.get("type") == "done" for h, _ in first.frames), first.log
        assert not prepared.alive()
        with pytest.raises(RuntimeError, match="one job"):
            prepared.run(wall_s=60)
    finally:
        prepared.close()
    assert leftovers("process", first, prepared.job_dir) == []


def test_other_limits_discard_the_waiting_sandbox_and_start_a_fresh_one():
    prestarter = Prestarter(make_sandbox("process"))
    try:
        prestarter.start_next(Limits())
        waiting = prestarter.pending.result()
        wait_for_hello(waiting)
        uid = waiting.running.uid
        other = Limits(stage_s=20.0)
        prepared = prestarter.prepare(other)
        assert prepared is not waiting and prepared.limits == other
        prepared.close()
    finally:
        prestarter.close()
    assert gone(uid, waiting.job_dir) == []


def test_a_harness_killed_while_waiting_is_replaced():
    data = REFERENCES["lm"].read_bytes()
    prestarter = Prestarter(make_sandbox("process"))
    try:
        prestarter.start_next(CORRECTNESS.limits)
        waiting = prestarter.pending.result()
        wait_for_hello(waiting)
        os.killpg(waiting.running.proc.pid, signal.SIGKILL)
        waiting.running.proc.wait(10)
        report = grade_bytes(data, "reference_lm.py", CORRECTNESS, sandbox=prestarter)
    finally:
        prestarter.close()
    assert report["summary"] == {"pass": 9}, report["summary"]
    assert gone(waiting.running.uid, waiting.job_dir) == []


def test_closing_the_prestarter_stops_the_waiting_sandbox():
    prestarter = Prestarter(make_sandbox("process"))
    prestarter.start_next(Limits())
    waiting = prestarter.pending.result()
    wait_for_hello(waiting)
    prestarter.close()
    assert gone(waiting.running.uid, waiting.job_dir) == []
    prestarter.start_next(Limits())
    assert prestarter.pending is None, "a closed Prestarter starts nothing more"


def test_a_waiting_harness_whose_judge_is_gone_exits_by_itself():
    prepared = ProcessSandbox().prepare(Limits())
    try:
        wait_for_hello(prepared)
        prepared.running.proc.stdin.close()  # what the kernel does when the worker holding the go dies
        assert prepared.running.proc.wait(timeout=10) == 0
    finally:
        prepared.close()
    assert gone(prepared.running.uid, prepared.job_dir) == []
