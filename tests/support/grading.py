"""Paths to the example submissions and a cached way to grade source text through the real judge and sandbox."""
import json
from pathlib import Path

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits

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
