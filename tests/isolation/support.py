"""What a grading may leave on the host, looked for everywhere a sandbox uid can write, and how to grade for these tests."""
import os
from pathlib import Path

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits
from grader.sandbox.cleanup import sysv_objects
from grader.sandbox.docker import SANDBOX_UID
from grader.sandbox.process import SHARED_TMP
from grader.sandbox.uids import quarantined
from tests.sandbox.support import Recorder, layer_missing, leftovers, require_backend

ROOT = Path(__file__).resolve().parents[2]
ATTACKS_DIR = ROOT / "tests" / "attacks"
REFERENCE = ROOT / "submissions" / "reference_lm.py"
CHECKS = ("split_heads", "attention_sdpa", "rope")
# a budget per check that fits 100k files and two 3000-deep trees on a loaded machine
LIMITS = dict(stage_s=60.0, stage_mem_mb=512, memory_mb=1536, pids=64, output_mb=16, scratch_mb=64)
# names the leftover attacks (tests/attacks) give what they leave
MARKS = ("grader-left-", "grader-deep-", "grader-many-", "grader-odd-", "grader-daemon-heartbeat")
VARIANTS = ("process", "process-weak", "docker")


def sandbox_for(variant: str) -> Recorder:
    """The backend under test: every layer (process, docker) or the operator-allowed fallback without bwrap; the
    process backend's sandboxes started ahead as a worker's (the teardown after the run's done frame)."""
    if variant.startswith("process") and os.geteuid() != 0:
        layer_missing("the process backend's full set of layers (uid pool, cgroup) needs root")
    if variant == "process-weak":
        return Recorder("process", ahead=True, bwrap=False, allow_weak=True)
    require_backend(variant)
    return Recorder(variant, ahead=variant == "process")


def sandbox_uid(run) -> int:
    return int(run.ident) if run.backend == "process" else SANDBOX_UID


def traces(run, job_dir: Path, ended: float) -> list[str]:
    """Everything of this run still on the host: the shared helper's list, SysV objects, marked files, quarantine."""
    left = leftovers(run.backend, run, job_dir, ended)
    uid = sandbox_uid(run)
    left += [f"sysv {kind} {ident} of uid {uid}" for kind, ident in sysv_objects(uid)]
    for top in SHARED_TMP:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        left += [f"file {e.path}" for e in entries if e.name.startswith(MARKS)
                 and e.stat(follow_symlinks=False).st_uid == uid]
    if run.backend == "process" and uid in quarantined():
        left.append(f"uid {uid} quarantined: {quarantined()[uid]['reason'][:300]}")
    return left


def grade_attack(attack: str, sandbox: Recorder) -> dict:
    """The reference with the attack appended, graded on the three quick checks."""
    text = REFERENCE.read_text() + f"\n\n# ---- attack: {attack} ----\n" + (ATTACKS_DIR / f"{attack}.py").read_text()
    return grade_bytes(text.encode(), f"{attack}.py", Options(only=CHECKS, limits=Limits(**LIMITS)), sandbox=sandbox)


def grade_reference(sandbox: Recorder) -> dict:
    """A correct submission, every check but the long training and evaluation ones."""
    return grade_bytes(REFERENCE.read_bytes(), "reference_lm.py", Options(skip=("training", "evaluation")),
                       sandbox=sandbox)
