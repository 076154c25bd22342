"""After a stage is killed, the harness (grader/harness/main.py) waits for what that stage started to exit before the
next stage runs, and its frames survive a moment of ENOMEM (grader/harness/wire.py).

Why: a memory bomb spread over helper processes fills the sandbox; they are killed with the stage, but free their
memory only as they exit. A next stage started at once found its pipe writes refused (ENOMEM: a pipe's buffer is
charged to the sandbox) and exited without a verdict, a `crash` for a correct check (seen once in CI, docker).
The kernel's refusal cannot be provoked on demand from a test, so the wait is shown on real processes and on a /proc
laid out in a folder, and the retry on a write that fails as the kernel's would.
"""
import errno
import os
import signal
import time
from types import SimpleNamespace

import pytest

from grader.harness import main as harness
from grader.harness import wire

STAT = "{pid} (python3) {state} 1 {pgrp} {pgrp} 0 -1 4194624 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"


def fake_proc(tmp_path, processes) -> str:
    """A folder laid out as /proc holding processes given as (pid, state, process group)."""
    for pid, state, pgrp in processes:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(STAT.format(pid=pid, state=state, pgrp=pgrp))
    (tmp_path / "self").mkdir()
    return str(tmp_path)


def test_a_group_with_a_running_or_exiting_member_is_alive_and_one_of_zombies_is_not(tmp_path):
    proc = fake_proc(tmp_path, [(10, "S", 10), (11, "D", 10), (12, "Z", 20), (13, "R", 30)])
    assert harness.group_alive(10, proc)  # sleeping, and one in uninterruptible sleep (still freeing memory)
    assert not harness.group_alive(20, proc), "a zombie holds no memory: nothing to wait for"
    assert harness.group_alive(30, proc)
    assert not harness.group_alive(40, proc)
    assert not harness.group_alive(10, str(tmp_path / "absent")), "no /proc: nothing to wait on"


def test_the_wait_gives_up_at_its_limit(tmp_path):
    proc = fake_proc(tmp_path, [(10, "S", 10)])
    started = time.monotonic()
    assert harness.await_group_gone(10, limit_s=0.1, proc=proc) is False
    assert 0.1 <= time.monotonic() - started < 2.0


def test_the_wait_ends_when_the_killed_groups_helpers_have_exited():
    """A stage's child (its own group) with two helpers it forked; the child is killed and reaped as the harness does,
    the helpers (children of the dead child, reaped by someone else) must be gone before the wait returns."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        for _ in range(2):
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                time.sleep(60)
                os._exit(0)
        os.write(write_fd, b"r")
        time.sleep(60)
        os._exit(0)
    os.close(write_fd)
    assert os.read(read_fd, 1) == b"r"
    os.close(read_fd)
    assert harness.group_alive(pid), "the helpers run in the child's group"
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert harness.await_group_gone(pid, limit_s=10.0) is True
    assert not harness.group_alive(pid)


def test_a_frame_is_written_after_a_moment_of_enomem(monkeypatch):
    read_fd, write_fd = os.pipe()
    real_write, refusals = os.write, []

    def write(fd, data):
        if len(refusals) < 3:
            refusals.append(fd)
            raise OSError(errno.ENOMEM, "Cannot allocate memory")
        return real_write(fd, data)

    monkeypatch.setattr(wire, "os", SimpleNamespace(write=write))  # wire's os only: the test's own writes stay real
    wire.write_frame(write_fd, {"type": "result", "outcome": "ok"}, b"abc")
    os.close(write_fd)
    frames = wire.FrameReader(1 << 10).feed(os.read(read_fd, 1 << 16))
    os.close(read_fd)
    assert len(refusals) == 3
    assert frames == [({"type": "result", "outcome": "ok"}, b"abc")]


def test_enomem_that_lasts_and_other_errors_still_raise(monkeypatch):
    monkeypatch.setattr(wire, "ENOMEM_RETRIES", 2)
    monkeypatch.setattr(wire.time, "sleep", lambda s: None)
    for code in (errno.ENOMEM, errno.EPIPE):
        def write(fd, data, code=code):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr(wire, "os", SimpleNamespace(write=write))
        with pytest.raises(OSError) as raised:
            wire.write_frame(1, {"type": "x"})
        assert raised.value.errno == code, f"errno {code} did not raise as itself"


def test_stat_fields_start_after_a_command_name_that_holds_parentheses_and_spaces(tmp_path):
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "stat").write_text(STAT.format(pid=7, state="S", pgrp=7).replace("(python3)", "(a) R 1 (b)"))
    assert harness.stat_fields(7, str(tmp_path))[:3] == [b"S", b"1", b"7"]
    assert harness.group_alive(7, str(tmp_path))
    (tmp_path / "8").mkdir()
    (tmp_path / "8" / "stat").write_text("8 truncated")
    assert harness.stat_fields(8, str(tmp_path)) is None, "no command name: not a stat line"
    assert harness.stat_fields(9, str(tmp_path)) is None, "gone"
    assert not harness.dying(8, str(tmp_path)) and not harness.dying(9, str(tmp_path))
