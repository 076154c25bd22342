"""`grader check`: a table or one JSON document, exit 0 when grading completed, non-zero for usage errors."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.grading import REFERENCES, ROOT

GRADER = [sys.executable, "-m", "grader"]


def run(*args):
    """Run the real command line."""
    return subprocess.run([*GRADER, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.slow
def test_json_is_one_document_with_contract_ids():
    proc = run("check", str(REFERENCES["reverse"]), "--json", "--only", "split_heads,kv_cache")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [(c["id"], c["status"]) for c in report["checks"]] == [("split_heads", "pass"), ("kv_cache", "pass")]
    assert all({"id", "status", "message", "metrics"} <= set(c) for c in report["checks"])


@pytest.mark.slow
def test_table_without_colour_when_not_a_terminal():
    proc = run("check", str(REFERENCES["lm"]), "--skip", "checkpoint_reload,kv_cache,padding,causality,gradient_path")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout, "no colour codes when stdout is not a terminal"
    assert "split_heads" in proc.stdout and "pass" in proc.stdout and "kv_cache" not in proc.stdout


@pytest.mark.slow
def test_table_in_colour_on_a_terminal():
    import os
    import pty
    master, terminal = pty.openpty()
    proc = subprocess.Popen([*GRADER, "check", str(REFERENCES["lm"]), "--only", "split_heads"], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=terminal, stderr=subprocess.PIPE)
    os.close(terminal)
    out = b""
    while True:  # read while it writes: a full terminal buffer would block it
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(300) == 0, proc.stderr.read()
    assert b"\x1b[32m\x1b[1mpass" in out, out[-500:]  # green, bold


@pytest.mark.slow
def test_failing_submission_still_exits_zero(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('TRACK = "lm"\ndef split_heads(x, h):\n    return x\n')
    proc = run("check", str(bad), "--only", "split_heads", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["checks"][0]["status"] == "fail"


@pytest.mark.parametrize("args, needle", [
    (("check", "no/such/file.py"), "does not exist"),
    (("check", str(REFERENCES["lm"]), "--only", "attention,rope"), "unknown check id attention"),
    (("check",), "Missing argument"),
    (("check", str(REFERENCES["lm"]), "--steps", "0"), "Invalid value for '--steps'"),
])
def test_usage_errors_exit_non_zero_with_a_message(args, needle):
    proc = run(*args)
    assert proc.returncode == 2 and needle in proc.stderr, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_steps_sets_the_training_budget_and_the_result_records_it():
    proc = run("check", str(REFERENCES["lm"]), "--json", "--only", "training", "--steps", "30")
    assert proc.returncode == 0, proc.stderr
    training = json.loads(proc.stdout)["checks"][0]
    assert training["metrics"]["steps"] == 30, training["metrics"]
    # 30 steps are too few for the pass threshold (measured at the default 300): the message says how many ran
    assert training["status"] == "fail" and "after 30 steps" in training["message"], training["message"]


@pytest.mark.slow
def test_the_command_leaves_nothing_behind_when_it_skips_the_interpreters_teardown():
    """`grader check` ends with os._exit once it has printed (grader.cli.entry): the whole document is out, and the
    sandboxes' job directories are gone before it."""
    tmp = Path(tempfile.mkdtemp(prefix="grader-cli-tmp-"))
    tmp.chmod(0o755)  # the sandbox's uid reads its job directory under here
    try:
        proc = subprocess.run([*GRADER, "check", str(REFERENCES["lm"]), "--json", "--only", "split_heads,rope"],
                              capture_output=True, text=True, cwd=ROOT, timeout=300,
                              env={**os.environ, "TMPDIR": str(tmp)})
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert [c["status"] for c in report["checks"]] == ["pass", "pass"] and report["score"]
        assert sorted(p.name for p in tmp.iterdir()) == [], "a job directory outlived the command"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
