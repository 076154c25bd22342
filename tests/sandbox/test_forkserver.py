"""The process backend's fork server, its default as root (grader/sandbox/forkserver.py): the same grading, the
same verdicts, and nothing outlives the worker. The attack corpus runs on it too (tests/test_attacks.py,
`process-fork`)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grader.judge import Options, grade_bytes, grade_file
from grader.sandbox import Limits, forkserver
from grader.sandbox.process import ProcessSandbox, uid_processes
from tests.feedback import bugs
from tests.sandbox.support import alive, layer_missing

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "submissions" / "reference_lm.py"


@pytest.fixture(autouse=True)
def as_root():
    if os.geteuid() != 0:
        layer_missing("the fork server needs root (namespaces, pivot_root, setuid)")


def verdicts(report: dict) -> list:
    """What a student reads of each check, without the timings."""
    return [{k: c.get(k) for k in ("id", "status", "message", "metrics", "score")} for c in report["checks"]]


@pytest.mark.slow
def test_a_forked_sandbox_grades_as_a_started_one():
    options = Options(only=("split_heads", "attention_sdpa", "rope", "gradient_path", "causality", "padding",
                            "kv_cache", "checkpoint_reload", "no_shortcuts", "training"))
    forked = grade_file(REFERENCE, options, sandbox=ProcessSandbox(fork=True))
    started = grade_file(REFERENCE, options, sandbox=ProcessSandbox(fork=False))
    assert verdicts(forked) == verdicts(started)
    assert all(c["status"] == "pass" for c in forked["checks"]), verdicts(forked)



@pytest.mark.slow
def test_a_forked_sandbox_names_the_root_cause_a_started_one_names():
    """The diagnosis's stages import the judge's contract functions inside the sandbox (harness/reference_parts.py),
    where the harness's folder is not mounted: the zygote must have imported them before its fork."""
    options = Options(only=("split_heads", "causality"))
    text = bugs.source("merge_no_transpose_lm").encode()
    forked = grade_bytes(text, options=options, sandbox=ProcessSandbox(fork=True))
    started = grade_bytes(text, options=options, sandbox=ProcessSandbox(fork=False))
    causes = [{c["id"]: c.get("root_cause") for c in r["checks"]} for r in (forked, started)]
    assert causes[0] == causes[1]
    assert causes[0]["causality"]["check"] == "split_heads", verdicts(forked)


def test_the_zygote_holds_no_environment_and_is_restarted_when_gone():
    sandbox = ProcessSandbox(fork=True)
    first = sandbox.prepare(Limits())
    try:
        assert first.wait_ready(60)
        zygote = sandbox.fork_server.proc
        with open(f"/proc/{zygote.pid}/environ", "rb") as fh:
            assert fh.read() == b"PYTHONHASHSEED=0\0", "the zygote was given more than the sandboxes' hash seed"
        assert first.running.record.get("started") == "forked by the fork server"
    finally:
        first.close()
    killed = sandbox.fork_server.harness
    zygote.kill()
    zygote.wait(10)
    again = sandbox.prepare(Limits())  # the next sandbox starts another zygote
    try:
        assert again.wait_ready(60)
        assert sandbox.fork_server.proc.pid != zygote.pid
        assert not killed.exists(), "a killed zygote's harness copy was left when the next one started"
    finally:
        again.close()



def test_a_sandbox_is_started_when_the_fork_server_is_down():
    """A zygote that cannot run is the worker's problem: the grading gets a started sandbox and says why."""
    sandbox = ProcessSandbox(fork=True)
    sandbox.fork_server = forkserver.ForkServer("/bin/false")  # exits at once: every request fails
    waiting = sandbox.prepare(Limits())
    try:
        assert waiting.wait_ready(60)
        record = waiting.running.record
        assert "started" not in record and "started instead" in record["fork_server"], record
    finally:
        waiting.close()
    try:
        report = grade_file(REFERENCE, Options(only=("split_heads",)), sandbox=sandbox)
    finally:
        sandbox.fork_server.close()
    assert [c["status"] for c in report["checks"]] == ["pass"], verdicts(report)

WORKER = """
import json, sys, time
sys.path.insert(0, {root!r})
from grader.sandbox import Limits
from grader.sandbox.process import ProcessSandbox
sandbox = ProcessSandbox(fork=True)
waiting = sandbox.prepare(Limits())
assert waiting.wait_ready(60)
print(json.dumps({{"zygote": sandbox.fork_server.proc.pid, "sandbox": waiting.running.proc.pid,
                  "uid": waiting.running.uid, "harness": str(sandbox.fork_server.harness)}}), flush=True)
time.sleep(600)
"""


def test_nothing_outlives_a_killed_worker():
    worker = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WORKER.format(root=str(ROOT)))],
                              stdout=subprocess.PIPE, text=True)
    try:
        seen = json.loads(worker.stdout.readline())
        assert alive(seen["zygote"]) and uid_processes(seen["uid"])
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    deadline = time.monotonic() + 10
    harness = Path(seen["harness"])
    while time.monotonic() < deadline and (alive(seen["zygote"]) or uid_processes(seen["uid"]) or harness.exists()):
        time.sleep(0.1)
    assert not alive(seen["zygote"]), "the zygote outlived its worker"
    assert not harness.exists(), "the zygote's harness copy outlived its worker"
    assert not alive(seen["sandbox"]) and uid_processes(seen["uid"]) == [], "a sandbox outlived its worker"


def test_one_zygote_per_interpreter():
    assert forkserver.shared(sys.executable) is forkserver.shared(sys.executable)


class RecordingServer(forkserver.ForkServer):
    """A fork server that cannot start (its interpreter exits at once) and keeps the stdin file it was given."""

    def spawn(self, spec, stdin_r, channel_w, log_w, stdin_w):
        self.given = stdin_w
        return super().spawn(spec, stdin_r, channel_w, log_w, stdin_w)


def test_a_failed_fork_closes_the_stdin_file_not_only_its_number():
    """The sandbox's stdin pipe is a file by the time the fork server is asked. On failure the bare descriptor was
    closed and the file left open, so its collection closed the same number again, by then someone else's (seen in
    CI: the next test's subprocess pipe failed with EBADF)."""
    sandbox = ProcessSandbox(fork=True)
    server = sandbox.fork_server = RecordingServer("/bin/false")
    waiting = sandbox.prepare(Limits())  # the fork fails; a started sandbox takes its place
    try:
        assert waiting.wait_ready(60)
    finally:
        waiting.close()
        server.close()
    assert server.given.closed, "the file still owns a descriptor number that was already closed"
