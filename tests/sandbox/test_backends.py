"""One interface, two backends: the same results for the references, limits reported alike, `auto` chooses sensibly."""
import os
import re
import time

import pytest

from grader.checks import split_heads
from grader.checks.base import Context
from grader.configs import DEFAULT_SEED
from grader.judge import Options, grade_file, write_job
from grader.sandbox.base import new_job_dir
from grader.sandbox import Limits, choose_backend, make_sandbox
from grader.sandbox import docker as docker_backend
from grader.sandbox.cgroup import detect
from grader.source import read_source
from tests.sandbox.support import Recorder, backend_params, forked, layer_missing, leftovers, require_backend
from tests.support.grading import REFERENCES

_reports: dict = {}


def reference_report(track: str, backend: str) -> dict:
    key = (track, backend)
    if key not in _reports:
        require_backend(backend)
        _reports[key] = grade_file(REFERENCES[track], Options(backend=backend))
    return _reports[key]


# The process backend's started sandbox (bwrap, a fresh interpreter importing torch), whatever GRADER_SANDBOX_FORK
# says: the tests below that rest on torch's import use it; the forked sandbox's own follow them.
STARTED = {"process": {"fork": False}}


def forked_sandbox() -> Recorder:
    """The process backend's sandbox forked by the fork server (root only: namespaces, pivot_root, setuid)."""
    if os.geteuid() != 0:
        layer_missing("the fork server needs root (namespaces, pivot_root, setuid)")
    return Recorder("process", fork=True)


SECONDS = re.compile(r"\b\d+(\.\d+)? ?s\b")


def comparable(report: dict) -> list:
    """What a student sees of each check, without wall-clock timings (durations, "in 7.1 s" in a message)."""
    out = []
    for c in report["checks"]:
        c = {k: v for k, v in c.items() if k != "duration_s"}
        c["message"] = SECONDS.sub("<t> s", c["message"])
        c["metrics"] = {k: v for k, v in c["metrics"].items() if not k.endswith("_s")}
        out.append(c)
    return out


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("track", sorted(REFERENCES))
def test_reference_gets_identical_results_on_both_backends(track):
    process, docker = reference_report(track, "process"), reference_report(track, "docker")
    assert all(c["status"] == "pass" for c in process["checks"]), comparable(process)
    assert comparable(process) == comparable(docker)


@pytest.mark.slow
@pytest.mark.parametrize("backend", backend_params())
def test_report_records_the_backend_and_its_limits(backend):
    report = reference_report("lm", backend)
    assert report["sandbox"]["backend"] == backend and report["sandbox"]["limits"] == Limits().to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("backend", backend_params())
def test_whole_sandbox_out_of_memory_is_reported(backend):
    """Importing torch does not fit in 48 MiB: the container or cgroup kills the harness, and the judge says so."""
    require_backend(backend)
    sandbox = Recorder(backend, **STARTED.get(backend, {}))
    if backend == "process" and isinstance(detect(), str):
        layer_missing(f"no cgroup here to cap the whole sandbox: {detect()}")
    report = grade_file(REFERENCES["lm"], Options(only=("split_heads",), limits=Limits(memory_mb=48)), sandbox=sandbox)
    check = report["checks"][0]
    assert check["status"] == "crash" and "out of memory" in check["message"], check
    assert leftovers(backend, sandbox.runs[0], sandbox.job_dirs[0], sandbox.ended[0]) == []


@pytest.mark.slow
def test_a_forked_sandbox_out_of_memory_is_reported(tmp_path):
    """A forked sandbox is charged only the pages it touches (torch's are the zygote's): a submission that fills
    96 MB as it is imported overflows 48 MiB, the cgroup kills the child importing it, and the check says so."""
    sandbox = forked_sandbox()
    if isinstance(detect(), str):
        layer_missing(f"no cgroup here to cap the whole sandbox: {detect()}")
    hog = tmp_path / "hog.py"
    hog.write_text(REFERENCES["lm"].read_text() + "\n_FILLED = b'x' * (96 << 20)  # written, so charged\n")
    report = grade_file(hog, Options(only=("split_heads",), limits=Limits(memory_mb=48)), sandbox=sandbox)
    check = report["checks"][0]
    assert forked(sandbox.runs[0].layers), sandbox.runs[0].layers
    assert check["status"] == "oom" and "memory limit" in check["message"], check
    assert sandbox.runs[0].layers["oom_kills"] >= 1, sandbox.runs[0].layers
    assert leftovers("process", sandbox.runs[0], sandbox.job_dirs[0], sandbox.ended[0]) == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", backend_params())
def test_wall_clock_kill_is_reported_and_leaves_nothing(backend):
    require_backend(backend)
    job_dir = new_job_dir()
    write_job(job_dir, REFERENCES["lm"].read_text(), [], Options())
    sandbox = Recorder(backend, **STARTED.get(backend, {}))
    started = time.monotonic()
    try:
        run = sandbox.run(job_dir, Limits(), wall_s=0.5)  # less than torch's import
    finally:
        import shutil
        shutil.rmtree(job_dir, ignore_errors=True)
    assert time.monotonic() - started < 15
    assert run.killed and "budget" in run.killed, run.killed
    assert leftovers(backend, run, job_dir, sandbox.ended[0]) == []


@pytest.mark.slow
def test_a_forked_sandbox_past_its_wall_clock_is_killed_and_leaves_nothing():
    """Forked, the harness is ready at once: a stage whose submission never finishes importing is what overruns."""
    sandbox = forked_sandbox()
    text = REFERENCES["lm"].read_text() + "\nwhile True:\n    pass\n"
    stages = split_heads.plan(Context(DEFAULT_SEED, read_source(text.encode())))
    job_dir = new_job_dir()
    write_job(job_dir, text, stages, Options())
    started = time.monotonic()
    try:
        run = sandbox.run(job_dir, Limits(), wall_s=1.0)
    finally:
        import shutil
        shutil.rmtree(job_dir, ignore_errors=True)
    assert forked(run.layers), run.layers
    assert time.monotonic() - started < 15
    assert run.killed and "budget" in run.killed, run.killed
    assert leftovers("process", run, job_dir, sandbox.ended[0]) == []


def test_auto_takes_docker_when_an_engine_answers(monkeypatch):
    monkeypatch.setattr(docker_backend, "engine_answers", lambda *a, **k: None)
    monkeypatch.setattr(docker_backend, "image_present", lambda *a, **k: None)
    monkeypatch.setattr("grader.sandbox._AUTO_CACHE", {})
    assert choose_backend("auto")[0] == "docker"


def test_auto_falls_back_to_process_and_says_why(monkeypatch):
    monkeypatch.setattr(docker_backend, "engine_answers", lambda *a, **k: "no docker engine answers: refused")
    monkeypatch.setattr("grader.sandbox._AUTO_CACHE", {})
    assert choose_backend("auto") == ("process", "no docker engine answers: refused")


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="known: auto, docker, process"):
        make_sandbox("chroot")
