"""Shared by the integrity corpus: grade a text on a backend (cached), with the attack corpus' small limits."""
from pathlib import Path

import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits
from tests.sandbox.support import backend_params, require_backend  # noqa: F401  (re-exported)

ROOT = Path(__file__).resolve().parents[2]
LIMITS = dict(stage_s=10.0, stage_mem_mb=768, memory_mb=2048, pids=64, output_mb=16, scratch_mb=64)
BACKENDS = backend_params()
_cache: dict = {}


def graded_on(text: str, backend: str, only) -> dict:
    """The report for text on one backend, for the checks in only; the judge must not raise."""
    require_backend(backend)
    key = (text, backend, tuple(only))
    if key not in _cache:
        options = Options(only=tuple(only), limits=Limits(**LIMITS), backend=backend)
        _cache[key] = grade_bytes(text.encode(), "submission.py", options)
    return _cache[key]


def reference(track: str) -> str:
    """A reference solution's text."""
    return (ROOT / "submissions" / f"reference_{track}.py").read_text()


__all__ = ["BACKENDS", "LIMITS", "ROOT", "graded_on", "reference", "require_backend", "pytest"]
