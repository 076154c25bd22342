"""Starting `grader` stays light: the service and torch are imported only by the commands that use them."""
import subprocess
import sys

import pytest

HEAVY = ("torch", "flask", "sqlalchemy", "celery")


@pytest.mark.parametrize("code", ["import grader.cli",
                                  "from grader.cli import main; main(['--help'], standalone_mode=False)",
                                  "from grader.cli import main; main(['submit', '--help'], standalone_mode=False)"])
def test_the_cli_loads_no_heavy_module(code):
    probe = f"import sys\n{code}\nprint('loaded:', ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.rsplit("loaded:", 1)[-1].strip()
    assert not loaded, f"`{code}` imported {loaded}: move that import into the command that needs it"
