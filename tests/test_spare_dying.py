"""The harness's spares (grader/harness/main.py): one killed while it waits counts as dead as soon as the kill is
sent, not only once it is a zombie, so no stage is ordered to a spare that will never run it (it would be charged
with the spare's death: an `oom` for a correct submission).

The window between the kill and the zombie cannot be held open from a test, so dying() is shown on /proc's own
words for it (a pending SIGKILL, the exiting flag) written to a folder, and on real processes either side of it.
"""
import os
import signal
import subprocess
import sys

import pytest

from grader.harness import main as harness

STAT = "{pid} (python3) S 1 {pid} {pid} 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"
STATUS = "Name:\tpython3\nSigQ:\t0/1000\nSigPnd:\t{own:016x}\nShdPnd:\t{shared:016x}\nSigBlk:\t0000000000000000\n"


def fake_proc(tmp_path, pid=4242, flags=0x400040, own=0, shared=0) -> str:
    """A folder laid out as /proc for one process, with these flags and pending-signal masks."""
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "stat").write_text(STAT.format(pid=pid, flags=flags))
    (tmp_path / str(pid) / "status").write_text(STATUS.format(own=own, shared=shared))
    return str(tmp_path)


@pytest.mark.parametrize("state, dead", [
    ({"shared": 1 << 8}, True),  # SIGKILL (bit 9) pending for the process
    ({"own": 1 << 8}, True),  # pending for its thread
    ({"flags": 0x400044}, True),  # PF_EXITING
    ({"shared": 1 << 14}, False),  # SIGTERM pending: it may be handled, not a death
    ({}, False),
])
def test_a_pending_sigkill_or_the_exiting_flag_is_dying(tmp_path, state, dead):
    assert harness.dying(4242, fake_proc(tmp_path, **state)) is dead


def test_a_waiting_process_is_not_dying_and_an_unreadable_one_is_not_called_dead():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert not harness.dying(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert not harness.dying(proc.pid)  # gone from /proc: waitpid, not this, says so


def test_a_spare_killed_while_it_waits_is_not_taken(tmp_path):
    """take() skips a spare that was killed (here reaped at once; the dying() check covers the moments before)."""
    pid = os.fork()
    if pid == 0:
        signal.pause()
        os._exit(0)

    class Stub(harness.Spare):
        def __init__(self, pid):  # a spare without its pipes: only alive() and close() are used
            self.pid = pid

        def close(self):
            pass

    os.kill(pid, signal.SIGKILL)
    assert harness.take([Stub(pid)]) is None
