"""Paths to the example submissions and a cached way to grade source text through the real judge and sandbox."""
import json
from pathlib import Path

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits, Sandbox, make_sandbox

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "submissions"
REFERENCES = {"lm": SUBMISSIONS / "reference_lm.py", "reverse": SUBMISSIONS / "reference_reverse.py"}

_cache: dict = {}


def grade_text(text: str, only=(), skip=(), stage_s: float = 30.0, seed=None) -> dict:
    """Grade source text through the real judge and sandbox (cached per text and options)."""
    key = (text, tuple(only), tuple(skip), stage_s, seed)
    if key not in _cache:
        options = Options(only=tuple(only), skip=tuple(skip), limits=Limits(stage_s=stage_s))
        if seed is not None:
            options.seed = seed
        _cache[key] = grade_bytes(text.encode(), "submission.py", options)
    return _cache[key]


class _FirstReady(Sandbox):
    """A backend whose first prepare() hands out a sandbox it started earlier; later ones start as usual."""

    def __init__(self, inner: Sandbox, first):
        self.inner, self.first, self.name = inner, first, inner.name

    def run(self, job_dir, limits, wall_s, on_frame=None):
        return self.inner.run(job_dir, limits, wall_s, on_frame)

    def prepare(self, limits):
        first, self.first = self.first, None
        return first or self.inner.prepare(limits)


def grade_started_ahead(text: str, options: Options, backend: str = "process", before=None) -> dict:
    """Grade as a worker does: in a sandbox started before the job came, which has imported torch and forked the
    children the job will run in while it waited (grader/harness/main.py, Spare). before(prepared): called once it
    waits, before the job."""
    inner = make_sandbox(backend)
    ready = _FirstReady(inner, inner.prepare(options.limits))
    try:
        assert ready.first.wait_ready(120), "the sandbox started ahead did not import torch within 120 s"
        if before is not None:
            before(ready.first)
        return grade_bytes(text.encode(), "submission.py", options, sandbox=ready)
    finally:
        if ready.first is not None:
            ready.first.close()


def by_id(report: dict) -> dict:
    """check id -> the check's result dict."""
    return {c["id"]: c for c in report["checks"]}


def statuses(report: dict) -> dict:
    """check id -> status."""
    return {c["id"]: c["status"] for c in report["checks"]}


def explain(report: dict) -> str:
    """A compact dump for assertion messages."""
    return json.dumps([{k: c[k] for k in ("id", "status", "message")} for c in report["checks"]], indent=1)


def variant(track: str, old: str, new: str) -> str:
    """A reference with one substitution; old must occur exactly once."""
    text = REFERENCES[track].read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in the {track} reference"
    return text.replace(old, new)
