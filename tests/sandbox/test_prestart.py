"""Sandboxes started ahead of their job (both backends, and the Prestarter a worker keeps).

What must hold: the verdicts are those of a cold start, the wall clock counts from the job's go, a
sandbox started ahead serves one job only, and one never used (other limits, a closed Prestarter, a
harness killed while waiting, a worker gone) leaves nothing behind.
"""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from grader.checks import split_heads
from grader.checks.base import Context
from grader.configs import DEFAULT_SEED
from grader.harness.main import stat_fields
from grader.judge import Options, grade_bytes, write_job
from grader.sandbox import Limits, Sandbox, make_sandbox
from grader.sandbox.base import Prepared, new_job_dir, settle
from grader.sandbox.prestart import Prestarter
from grader.sandbox.process import uid_processes
from grader.source import read_source
from tests.test_known_bad import KNOWN_BAD
from tests.support.grading import REFERENCES, ROOT, grade_started_ahead
from tests.sandbox.support import alive, backend_params, forked, leftovers, require_backend
from tests.sandbox.support import docker_leftovers as support_docker_leftovers

pytestmark = pytest.mark.slow
CORRECTNESS = Options(skip=("training", "evaluation"), backend="process")


def sandbox_for(backend: str):
    """The backend's sandbox (docker: skipped with the reason when no engine or image is here, failed in CI)."""
    require_backend(backend)
    return make_sandbox(backend)


class Cold(Sandbox):
    """A backend's cold path (its run() on a job laid out first), as a Prestarter falls back to."""

    def __init__(self, inner: Sandbox):
        self.inner, self.name = inner, inner.name

    def run(self, job_dir, limits, wall_s, on_frame=None):
        return self.inner.run(job_dir, limits, wall_s, on_frame)

    def prepare(self, limits):
        return Prepared(self, new_job_dir(), limits)


def harness_log(prepared) -> str:
    if hasattr(prepared, "running"):
        return prepared.running.log_path.read_text()
    return bytes(prepared.stdout.log).decode("utf-8", "replace")


def wait_for_hello(prepared) -> None:
    """Until the harness started ahead has imported torch and said hello."""
    assert prepared.wait_ready(120), f"the harness started ahead died or never said hello: {harness_log(prepared)}"


def docker_leftovers(prepared) -> list[str]:
    """The container and volume of a docker sandbox started ahead, if either is still there."""
    return support_docker_leftovers(prepared.ident, prepared.layers.get("volume"))


def gone(prepared, timeout_s: float = 10.0) -> list[str]:
    """What a sandbox that never ran a job still holds once it had time to go: processes or container, job directory."""
    deadline = time.monotonic() + timeout_s
    while True:
        if hasattr(prepared, "running"):
            left = [f"process {pid}" for pid in uid_processes(prepared.running.uid)]
        else:
            left = docker_leftovers(prepared)
        left += [f"job directory {prepared.job_dir}"] if prepared.job_dir.exists() else []
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def kill_waiting(prepared) -> None:
    """Kill a waiting sandbox from outside, as the OOM killer or an operator might."""
    if hasattr(prepared, "running"):
        if forked(prepared.running.record):
            # not a group leader: the fork outside its namespaces, whose death takes the namespace's init with it
            os.kill(prepared.running.proc.pid, signal.SIGKILL)
        else:
            os.killpg(prepared.running.proc.pid, signal.SIGKILL)
        prepared.running.proc.wait(10)
        return
    import docker
    client = docker.from_env()
    try:
        client.containers.get(prepared.ident).kill()
    finally:
        client.close()
    prepared.collector.join(10)


def verdicts(report: dict) -> list[tuple]:
    return [(c["id"], c["status"], c["message"]) for c in report["checks"]]


def one_stage_job():
    """split_heads' stages for the reference: a job that takes well under a second once torch is imported."""
    text = REFERENCES["lm"].read_text()
    return text, split_heads.plan(Context(DEFAULT_SEED, read_source(text.encode())))


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("which", ["reference_lm", "reference_reverse", "known_bad"])
def test_started_ahead_gives_the_verdicts_of_a_cold_start(which, backend, tmp_path):
    path = KNOWN_BAD.materialize(tmp_path)[0] if which == "known_bad" else REFERENCES[which.split("_")[1]]
    data = path.read_bytes()
    sandbox = sandbox_for(backend)
    cold = grade_bytes(data, path.name, CORRECTNESS, sandbox=Cold(sandbox))
    prestarter = Prestarter(sandbox)
    try:
        grade_bytes(data, path.name, CORRECTNESS, sandbox=prestarter)  # its close starts the next one
        assert prestarter.wait_ready(120), "the next sandbox was not started ahead"
        warm = grade_bytes(data, path.name, CORRECTNESS, sandbox=prestarter)
    finally:
        prestarter.close()
    assert warm["sandbox"]["backend"] == cold["sandbox"]["backend"] == backend
    assert warm["timings"]["sandbox_ahead_s"] > warm["timings"]["torch_import_s"] > 0, warm["timings"]
    assert cold["timings"]["sandbox_ahead_s"] == 0, "the cold path starts nothing ahead"
    assert verdicts(warm) == verdicts(cold)


@pytest.mark.parametrize("backend", backend_params())
def test_the_wall_clock_counts_from_the_go_not_from_the_start(backend):
    text, stages = one_stage_job()
    wall = {"process": 2.5, "docker": 4.0}[backend]  # docker's teardown after the job takes longer
    prepared = sandbox_for(backend).prepare(Limits())
    try:
        wait_for_hello(prepared)
        time.sleep(wall + 0.5)  # longer than the wall budget: a clock started at the start would kill the job
        write_job(prepared.job_dir, text, stages, Options())
        run = prepared.run(wall_s=wall)
    finally:
        prepared.close()
    assert run.killed is None, run.killed
    assert any(h.get("type") == "done" for h, _ in run.frames), run.log
    assert run.ahead_s >= wall + 0.5 and run.wall_s < wall


@pytest.mark.parametrize("backend", backend_params())
def test_a_sandbox_started_ahead_serves_one_job_only(backend):
    text, stages = one_stage_job()
    prepared = sandbox_for(backend).prepare(Limits())
    try:
        write_job(prepared.job_dir, text, stages, Options())
        first = prepared.run(wall_s=60)
        assert any(h.get("type") == "done" for h, _ in first.frames), first.log
        assert not prepared.alive()
        with pytest.raises(RuntimeError, match="one job"):
            prepared.run(wall_s=60)
    finally:
        prepared.close()
    assert prepared.closed.wait(30), "the sandbox's teardown did not end"
    assert leftovers(backend, first, prepared.job_dir) == []


def test_a_process_run_returns_at_its_done_frame_and_is_torn_down_after():
    """The frames leave at the harness's done frame; its exit, the kill and the sweep follow in a thread of their own
    (off the grading's latency), the uid held until then, and settle() waits for them."""
    text, stages = one_stage_job()
    prepared = sandbox_for("process").prepare(Limits())
    try:
        write_job(prepared.job_dir, text, stages, Options())
        run = prepared.run(wall_s=60)
        assert [h["type"] for h, _ in run.frames][-2:] == ["stage_end", "done"], run.log
        assert run.exit_code is None and prepared.lingering(), "the run waited for the harness's exit"
    finally:
        prepared.close()
    settle()
    assert prepared.closed.is_set() and not prepared.lingering()
    assert leftovers("process", run, prepared.job_dir) == []


@pytest.mark.parametrize("backend", backend_params())
def test_closing_a_sandbox_that_never_ran_leaves_nothing(backend):
    prepared = sandbox_for(backend).prepare(Limits())
    wait_for_hello(prepared)
    prepared.close()
    assert gone(prepared) == []


def test_a_sandbox_killed_the_moment_it_started_ends():
    """The kill alone, its stdin left open (no EOF to end it): a fork server's sandbox killed before it joined its
    cgroup was reached by no kill, and the teardown waited for it forever."""
    sandbox = sandbox_for("process")
    prepared = sandbox.prepare(Limits())
    running = prepared.running
    killing = threading.Thread(target=sandbox._cleanup, args=(running.proc, running.uid, running.cgroup), daemon=True)
    killing.start()
    killing.join(30)
    try:
        assert not killing.is_alive(), "the kill of a sandbox that had just started never ended"
    finally:
        prepared.close()
    assert gone(prepared) == []


@pytest.mark.parametrize("backend", backend_params())
def test_other_limits_discard_the_waiting_sandbox_and_start_a_fresh_one(backend):
    prestarter = Prestarter(sandbox_for(backend))
    try:
        prestarter.start_next(Limits())
        waiting = prestarter.pending.result()
        wait_for_hello(waiting)
        other = Limits(stage_s=20.0)
        prepared = prestarter.prepare(other)
        assert prepared is not waiting and prepared.limits == other
        prepared.close()
    finally:
        prestarter.close()
    assert gone(waiting) == []


@pytest.mark.parametrize("backend", backend_params())
def test_a_harness_killed_while_waiting_is_replaced(backend):
    data = REFERENCES["lm"].read_bytes()
    prestarter = Prestarter(sandbox_for(backend))
    try:
        prestarter.start_next(CORRECTNESS.limits)
        waiting = prestarter.pending.result()
        wait_for_hello(waiting)
        kill_waiting(waiting)
        assert not waiting.alive()
        report = grade_bytes(data, "reference_lm.py", CORRECTNESS, sandbox=prestarter)
    finally:
        prestarter.close()
    assert report["summary"] == {"pass": 9}, report["summary"]
    assert gone(waiting) == []


@pytest.mark.parametrize("backend", backend_params())
def test_closing_the_prestarter_stops_the_waiting_sandbox(backend):
    prestarter = Prestarter(sandbox_for(backend))
    prestarter.start_next(Limits())
    waiting = prestarter.pending.result()
    wait_for_hello(waiting)
    prestarter.close()
    assert gone(waiting) == []
    prestarter.start_next(Limits())
    assert prestarter.pending is None, "a closed Prestarter starts nothing more"


def test_a_waiting_harness_whose_judge_is_gone_exits_by_itself():
    prepared = sandbox_for("process").prepare(Limits())
    try:
        wait_for_hello(prepared)
        prepared.running.proc.stdin.close()  # what the kernel does when the worker holding the go dies
        assert prepared.running.proc.wait(timeout=10) == 0
    finally:
        prepared.close()
    assert gone(prepared) == []


def harness_processes(prepared) -> tuple[int, list[int]]:
    """The waiting harness and the children it forked, among its run uid's processes: the children are the leaves,
    the harness their one parent (above it, each with one child: bwrap and our init when started, the namespace's
    init when forked by the fork server, whose processes all carry the zygote's command line)."""
    parents = {}
    for pid in uid_processes(prepared.running.uid):
        fields = stat_fields(pid)
        if fields is not None:
            parents[pid] = int(fields[1])
    leaves = [pid for pid in parents if pid not in parents.values()]
    (harness,) = {parents[pid] for pid in leaves}
    return harness, leaves


def test_a_sandbox_started_ahead_forks_its_jobs_children_while_it_waits_and_they_hold_no_channel():
    # The shared child and the checkpoint's fresh one are forked before the job comes (grader/harness/main.py,
    # Spare); like every child of the harness they must not hold the channel to the judge.
    prepared = sandbox_for("process").prepare(Limits())
    try:
        wait_for_hello(prepared)
        harness, children = harness_processes(prepared)
        assert len(children) == 2, children
        # the channel's write end is the harness's; the judge holds the read end of the same pipe
        channel = os.readlink(f"/proc/self/fd/{prepared.running.collector.stream.fileno()}")
        assert channel.startswith("pipe:"), channel
        assert channel in [os.readlink(f"/proc/{harness}/fd/{fd}") for fd in os.listdir(f"/proc/{harness}/fd")]
        for pid in children:
            held = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            assert channel not in held, f"child {pid} holds the channel: {held}"
    finally:
        prepared.close()
    assert gone(prepared) == []


def test_children_killed_while_the_sandbox_waits_cost_the_job_nothing():
    # an idle sandbox's forked children could be killed from outside (the memory limit's OOM killer, an operator):
    # the harness forks others when the job comes
    def kill_children(prepared):
        harness, children = harness_processes(prepared)
        assert len(children) == 2, children
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        # dead before the job comes (SIGKILL lands a moment later; a forked sandbox takes its job at once)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(pid) for pid in children):
            time.sleep(0.01)
    report = grade_started_ahead(REFERENCES["lm"].read_text(), CORRECTNESS, before=kill_children)
    assert report["summary"] == {"pass": 9}, report["checks"]


WORKER_THAT_DIES = """
import os, signal
from grader.sandbox.docker import DockerSandbox
from grader.sandbox import Limits
prepared = DockerSandbox().prepare(Limits())
assert prepared.wait_ready(120), "no hello"
print(prepared.ident, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.docker
def test_a_waiting_container_whose_worker_died_stops_and_is_swept_only_after_its_deadline():
    require_backend("docker")
    import docker
    from grader.sandbox import docker as docker_backend
    worker = subprocess.run([sys.executable, "-c", WORKER_THAT_DIES], cwd=ROOT, capture_output=True, text=True,
                            timeout=180)
    assert worker.returncode == -signal.SIGKILL, worker.stderr
    client = docker.from_env()
    container = client.containers.get(worker.stdout.strip())
    try:
        # the attach socket closed with the worker: StdinOnce gives the harness EOF, and no job.json means no job
        assert container.wait(timeout=20)["StatusCode"] == 0
        assert container.id[:12] not in docker_backend.sweep_stale(client), "swept while inside its allowance"
        deadline = int(container.labels["grader.sandbox.deadline"])
        assert deadline >= time.time() + docker_backend.IDLE_S
        assert container.id[:12] in docker_backend.sweep_stale(client, now=deadline + 1)
    finally:
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        client.close()


@pytest.mark.docker
def test_a_waiting_container_past_its_deadline_allowance_is_not_used():
    require_backend("docker")
    text, stages = one_stage_job()
    prepared = sandbox_for("docker").prepare(Limits())
    try:
        wait_for_hello(prepared)
        prepared.deadline = time.time() + 100  # as if it had waited almost its whole allowance
        write_job(prepared.job_dir, text, stages, Options())
        run = prepared.run(wall_s=60)  # would end past the deadline a sweep goes by
        assert gone(prepared) == [f"job directory {prepared.job_dir}"], "the waiting container was removed"
    finally:
        prepared.close()
    assert run.killed is None and any(h.get("type") == "done" for h, _ in run.frames), run.log
    assert run.ident != prepared.ident and run.ahead_s == 0, "the job ran cold in a container of its own"
    assert leftovers("docker", run, prepared.job_dir) == []
