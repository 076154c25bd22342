"""Which interpreter the process sandbox runs, and whether its unprivileged uid can reach it."""
import os
import stat
import sys
from pathlib import Path

# `make setup` (as root) installs torch here, world-readable, for the sandbox uids.
DEFAULT_RUNNER = "/opt/transformer-grader/runner/bin/python"


class RunnerUnreachable(RuntimeError):
    """The sandbox uid could not execute the interpreter: an installation problem, never a student's."""


def runner_python() -> str:
    """GRADER_RUNNER_PYTHON, else the shared runner venv if installed, else this interpreter."""
    configured = os.environ.get("GRADER_RUNNER_PYTHON")
    if configured:
        return configured
    return DEFAULT_RUNNER if os.path.exists(DEFAULT_RUNNER) else sys.executable


def world_reachable(path: str, execute: bool) -> bool:
    """True when 'other' may traverse every directory above path and read (and execute) its target."""
    target = Path(os.path.realpath(path))
    for parent in target.parents:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
    mode = os.stat(target).st_mode
    return bool(mode & stat.S_IROTH and (mode & stat.S_IXOTH or not execute))


def check_reachable(python: str) -> None:
    """Raise RunnerUnreachable with the fix when the sandbox uid cannot run python, or its venv."""
    for path, execute in ((python, True), (os.path.join(os.path.dirname(python), "..", "pyvenv.cfg"), False)):
        if os.path.exists(path) and not world_reachable(path, execute):
            raise RunnerUnreachable(
                f"the sandbox uid cannot reach {os.path.realpath(path)}: run `make setup` as root (it installs the "
                f"runner at {os.path.dirname(os.path.dirname(DEFAULT_RUNNER))}) or set GRADER_RUNNER_PYTHON to a "
                "world-readable interpreter with torch and safetensors")
