"""`grader check` on a terminal prints each verdict as the judge decides it, then the table as before; into a pipe
(or with --json) the output is what it always was."""
import os
import pty
import re
import subprocess

import pytest

from tests.cli.test_check import GRADER, run
from tests.support.grading import REFERENCES, ROOT

pytestmark = pytest.mark.slow
ONLY = "split_heads,rope"
LIVE = re.compile(r"^(?:\x1b\[[0-9;]*m)*pass\s*(?:\x1b\[[0-9;]*m)*\s+(split_heads|rope): ", re.M)


def on_a_terminal(*args) -> str:
    master, terminal = pty.openpty()
    proc = subprocess.Popen([*GRADER, *args], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=terminal,
                            stderr=subprocess.PIPE)
    os.close(terminal)
    out = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(300) == 0, proc.stderr.read()
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


def test_each_verdict_is_printed_as_it_comes_then_the_table():
    out = on_a_terminal("check", str(REFERENCES["lm"]), "--only", ONLY)
    assert [m.group(1) for m in LIVE.finditer(out)] == ["split_heads", "rope"], out[-2000:]
    table = out.index(os.path.basename(str(REFERENCES["lm"])))  # the table's first line names the file
    assert max(m.start() for m in LIVE.finditer(out)) < table, "the verdicts come before the table"


def test_into_a_pipe_nothing_is_printed_early():
    proc = run("check", str(REFERENCES["lm"]), "--only", ONLY)
    assert proc.returncode == 0, proc.stderr
    assert not LIVE.search(proc.stdout), proc.stdout
    assert proc.stdout.startswith(os.path.basename(str(REFERENCES["lm"]))), "the table, as before"
