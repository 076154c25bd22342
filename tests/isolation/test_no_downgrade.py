"""The process backend grades only with its full set of layers: bubblewrap out of PATH refuses with the remedy,
GRADER_SANDBOX_ALLOW_WEAK=true grades marked weak, probes are re-run, and every report lists its layers."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits, ProcessSandbox, bwrap
from grader.sandbox.isolation import ALLOW_WEAK_ENV, IsolationMissing
from grader.sandbox.process import FULL
from tests.sandbox.support import backend_params, layer_missing, require_backend

from .support import REFERENCE, ROOT

QUICK = Options(only=("split_heads",))
NO_BWRAP = "/nonexistent-grader-test"  # a PATH with no bwrap on it (the probe looks it up on PATH each time)


@pytest.fixture
def as_root():
    if os.geteuid() != 0:
        layer_missing("the process backend's full set of layers (uid pool, cgroup) needs root")


@pytest.fixture
def strict(monkeypatch):
    """No operator override in the environment."""
    monkeypatch.delenv(ALLOW_WEAK_ENV, raising=False)


def run_groups() -> list[str]:
    """This test process's run cgroups still on the host (a refused run must remove the one it made)."""
    found = []
    for base in (Path("/sys/fs/cgroup/grader-sandbox"), Path("/sys/fs/cgroup/memory/grader-sandbox"),
                 Path("/sys/fs/cgroup/pids/grader-sandbox")):
        if base.is_dir():
            found += [str(d) for d in base.glob(f"run-{os.getpid()}-*")]
    return found


def test_bwrap_unshares_every_namespace_by_name():
    cmd = bwrap.command(Path("/tmp/job"), sys.executable, 8, None)
    for ns in ("user", "ipc", "pid", "net", "uts"):
        assert f"--unshare-{ns}" in cmd, f"bwrap must unshare {ns} (not the -try of --unshare-all): {cmd}"
    assert "--unshare-all" not in cmd and "--unshare-user-try" not in cmd
    binds = {cmd[i + 1] for i, a in enumerate(cmd) if a in ("--bind", "--ro-bind", "--ro-bind-try", "--dev-bind")}
    assert not any(b == "/run" or b.startswith(("/run/", "/var/")) for b in binds), f"host state bound in: {binds}"


def test_refuses_without_bubblewrap_naming_the_layer_and_the_remedy(as_root, strict, monkeypatch):
    monkeypatch.setenv("PATH", NO_BWRAP)
    with pytest.raises(IsolationMissing) as caught:
        grade_bytes(REFERENCE.read_bytes(), "reference_lm.py", QUICK, sandbox=ProcessSandbox())
    message = str(caught.value)
    for text in ("bubblewrap is not installed", "apt-get install bubblewrap", f"{ALLOW_WEAK_ENV}=true",
                 bwrap.LAYER):
        assert text in message, f"{text!r} not in the refusal: {message}"
    assert run_groups() == [], "the refused run's cgroup is still there"


def test_allow_weak_grades_and_every_result_says_weak(as_root, monkeypatch):
    monkeypatch.setenv("PATH", NO_BWRAP)
    monkeypatch.setenv(ALLOW_WEAK_ENV, "true")
    report = grade_bytes(REFERENCE.read_bytes(), "reference_lm.py", QUICK, sandbox=ProcessSandbox())
    box = report["sandbox"]
    assert [c["status"] for c in report["checks"]] == ["pass"], report["checks"]
    assert box["weak"] is True and box["layers"] == ["uid", "rlimits", "seccomp", "cgroup"], box
    assert any("bubblewrap is not installed" in m for m in box["missing"]), box


def test_a_failed_probe_is_not_remembered(as_root, strict, monkeypatch):
    """Mending bubblewrap fixes the next grading, not the next restart of the worker."""
    sandbox = ProcessSandbox()
    keys = []  # the probe's cache keys (bwrap, uid, interpreter) the failing grading asked under
    remembered = bwrap._try
    monkeypatch.setattr(bwrap, "_try", lambda *key: keys.append(key) or remembered(*key))
    remembered.cache_clear()  # an earlier test's remembered success would answer without running the probe
    real = bwrap.command
    # bwrap found but not working: the remembered probe itself runs and fails (no bwrap on PATH never reaches it)
    monkeypatch.setattr(bwrap, "command", lambda *args, **kwargs: [
        # /bin/sh: the probe runs as a sandbox uid, which may not reach the test's interpreter (a 0700 checkout)
        "/bin/sh", "-c", "echo 'stand-in bwrap: cannot build the sandbox' >&2; exit 1"])
    with pytest.raises(IsolationMissing, match="bwrap does not work here: stand-in bwrap"):
        grade_bytes(REFERENCE.read_bytes(), "reference_lm.py", QUICK, sandbox=sandbox)
    failed = list(keys)
    monkeypatch.setattr(bwrap, "command", real)  # "fixed" again
    report = grade_bytes(REFERENCE.read_bytes(), "reference_lm.py", QUICK, sandbox=sandbox)
    assert report["sandbox"]["weak"] is False and report["sandbox"]["layers"] == list(FULL), report["sandbox"]
    # the next grading may lease another uid (another cache key), so ask under the failing keys themselves
    assert failed and all(remembered(*key) is None for key in failed), f"a failure was remembered: {failed}"


@pytest.mark.slow
def test_grader_check_prints_the_refusal_and_exits_non_zero(as_root):
    env = {**os.environ, "PATH": NO_BWRAP}  # grader check always uses the process backend
    env.pop(ALLOW_WEAK_ENV, None)
    proc = subprocess.run([sys.executable, "-m", "grader", "check", str(REFERENCE), "--only", "split_heads"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert "not graded" in proc.stderr and "apt-get install bubblewrap" in proc.stderr, proc.stderr


def test_not_root_is_refused_too(as_root, strict):
    """Without root there is no uid of its own and no cgroup: that is fewer layers, refused the same way."""
    sandbox = ProcessSandbox()
    sandbox.privileged = False  # what a non-root grader gets
    with pytest.raises(IsolationMissing, match="uid is missing"):
        sandbox.prepare(Limits())
    assert run_groups() == []


def test_layers_turned_off_need_allow_weak(strict, monkeypatch):
    for off in ({"bwrap": False}, {"seccomp": False}, {"cgroup": False}):
        with pytest.raises(IsolationMissing, match="allow_weak"):
            ProcessSandbox(**off)
        ProcessSandbox(**off, allow_weak=True)  # a test or benchmark that means it
    monkeypatch.setenv(ALLOW_WEAK_ENV, "true")
    ProcessSandbox(bwrap=False)  # the operator's switch


@pytest.mark.slow
@pytest.mark.parametrize("backend", backend_params())
def test_every_report_lists_its_layers(backend, strict):
    if backend == "process" and os.geteuid() != 0:
        layer_missing("the process backend's full set of layers needs root")
    require_backend(backend)
    report = grade_bytes(REFERENCE.read_bytes(), "reference_lm.py", Options(only=("split_heads",), backend=backend))
    box = report["sandbox"]
    expected = list(FULL) if backend == "process" else ["network:none", "read-only", "cap-drop:ALL",
                                                         "no-new-privileges", "non-root:10001", "memory", "pids",
                                                         "ipc:private", "seccomp:docker-default"]
    assert box["layers"] == expected and box["weak"] is False, box
