"""Helpers for the client's tests: running `grader` (in-process or as a real process) and making submissions."""
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
GRADER = str(Path(sys.executable).parent / "grader")
REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_text()
# Grading settings for the cluster: quick heartbeats and sweeps, no per-period attempt limit.
CLUSTER_SETTINGS = {"HEARTBEAT_S": 1, "LEASE_S": 20, "SWEEP_INTERVAL_S": 5, "REQUEUE_AFTER_S": 10,
                    "RETRY_BACKOFF_S": 1, "VISIBILITY_TIMEOUT_S": 120, "ENFORCE_ATTEMPTS": False,
                    "PUBLISH_RETRIES": 1}
# split_heads with the right shape and the wrong layout: the split_heads check fails, so these students score less.
BROKEN = ("\n\ndef split_heads(x, num_heads):\n    B, T, D = x.shape\n"
          "    return x.reshape(B, num_heads, T, D // num_heads)\n")


@dataclass
class Server:
    url: str
    app: object
    course: object  # svc_helpers.Course: slug, instructor, alice, bob tokens
    workdir: Path
    worker: object = None

    def env(self, token: str | None = None, **extra) -> dict:
        """GRADER_SERVER/GRADER_TOKEN for this server (token: the instructor's unless given)."""
        return {"GRADER_SERVER": self.url, "GRADER_TOKEN": token or self.course.instructor, **extra}


@dataclass
class Ran:
    code: int
    out: str
    err: str


def invoke(*args, env: dict | None = None) -> Ran:
    """`grader ARGS` in this process (fast): exit code, stdout and stderr apart."""
    from grader.cli import main
    result = CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def run(*args, env: dict | None = None, timeout: float = 300) -> Ran:
    """`grader ARGS` as a real process: what a shell script sees."""
    proc = subprocess.run([GRADER, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)
    return Ran(proc.returncode, proc.stdout, proc.stderr)


def submission(tag: str, broken: bool = False) -> str:
    """The LM reference, made unique by a comment; broken: with a split_heads that fails its check."""
    return REFERENCE + (BROKEN if broken else "") + f"\n# {tag}\n"


def one_line_error(ran: Ran) -> str:
    """The error line of a failed command; asserts it is one line and no traceback."""
    lines = [line for line in ran.err.splitlines() if line.strip()]
    assert "Traceback" not in ran.err, f"a traceback instead of one line:\n{ran.err}"
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, f"expected one 'error: ...' line on stderr, got:\n{ran.err}"
    return errors[0]
