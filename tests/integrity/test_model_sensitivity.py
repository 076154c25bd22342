"""Degenerate and cheating models (tests/integrity/models/) earn nothing on the checks they attack, on both backends.

Each model file is appended to (or substituted into) a reference, as a student would write it: `BASE` names the
reference's track, `REPLACE` lists optional (old, new) substitutions, and `EXPECT` is either "independent" (the
logits ignore the input: every model-level check fails, saying so) or {check id: "fail"} (those checks fail and the
other model-level checks still pass, so the verdict is about the attack, not about the file).
"""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.grading import REFERENCES, ROOT
from grader.checks.sensitivity import INDEPENDENT
from grader.judge import Options, grade_bytes
from tests.sandbox.support import backend_params, require_backend

pytestmark = pytest.mark.slow

MODELS_DIR = Path(__file__).resolve().parent / "models"
MODELS = sorted(p.stem for p in MODELS_DIR.glob("*.py"))
MODEL_CHECKS = ("gradient_path", "causality", "padding", "kv_cache", "checkpoint_reload")


def metadata(name: str) -> dict:
    """BASE, EXPECT and REPLACE of a model file, read without running it."""
    found = {"REPLACE": []}
    for node in ast.parse((MODELS_DIR / f"{name}.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in ("BASE", "EXPECT", "REPLACE"):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def submission(name: str) -> str:
    """The reference of the model's track with the model's substitutions, then the model's code."""
    meta = metadata(name)
    text = REFERENCES[meta["BASE"]].read_text()
    for old, new in meta["REPLACE"]:
        assert text.count(old) == 1, f"{name}: {old!r} occurs {text.count(old)} times in the reference"
        text = text.replace(old, new)
    return text + f"\n\n# ---- integrity model: {name} ----\n" + (MODELS_DIR / f"{name}.py").read_text()


_graded: dict = {}


def graded(text: str, backend: str) -> dict:
    """check id -> result dict, for the model-level checks only (cached per text and backend)."""
    key = (text, backend)
    if key not in _graded:
        require_backend(backend)
        report = grade_bytes(text.encode(), "submission.py", Options(only=MODEL_CHECKS, backend=backend))
        _graded[key] = {c["id"]: c for c in report["checks"]}
    return _graded[key]


def table(results: dict) -> str:
    """One line per check for an assertion message."""
    return "\n".join(f"{cid}: {c['status']}: {c['message'][:300]}" for cid, c in results.items())


BACKENDS = backend_params()
MATRIX = [pytest.param(m, b.values[0], id=f"{m}-{b.id}", marks=b.marks) for m in MODELS for b in BACKENDS]


@pytest.mark.parametrize("name,backend", MATRIX)
def test_model_earns_nothing_on_the_attacked_checks(name, backend):
    results = graded(submission(name), backend)
    expect = metadata(name)["EXPECT"]
    if expect == "independent":
        for cid in MODEL_CHECKS:
            assert results[cid]["status"] == "fail", f"{name}: {cid} must fail\n{table(results)}"
            assert INDEPENDENT in results[cid]["message"], f"{name}: {cid} must say why\n{table(results)}"
        return
    for cid, status in expect.items():
        assert results[cid]["status"] == status, f"{name}: {cid} must be {status}\n{table(results)}"
    others = {cid: c["status"] for cid, c in results.items() if cid not in expect}
    assert set(others.values()) == {"pass"}, f"{name}: the checks it does not attack must pass\n{table(results)}"


@pytest.mark.parametrize("track,backend", [pytest.param(t, b.values[0], id=f"{t}-{b.id}", marks=b.marks)
                                           for t in sorted(REFERENCES) for b in BACKENDS])
def test_reference_keeps_full_marks(track, backend):
    results = graded(REFERENCES[track].read_text(), backend)
    assert {c["status"] for c in results.values()} == {"pass"}, table(results)


def test_every_model_declares_its_expectation():
    for name in MODELS:
        meta = metadata(name)
        assert meta.get("BASE") in REFERENCES, f"{name}: BASE must name a track"
        expect = meta.get("EXPECT")
        assert expect == "independent" or (isinstance(expect, dict) and set(expect) <= set(MODEL_CHECKS)), name


@pytest.mark.parametrize("name", ["bias_only_reverse", "window_cache_8_lm", "peek_when_padded_lm"])
def test_grader_check_json_exits_zero(name, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(submission(name))
    command = [sys.executable, "-m", "grader", "check", str(path), "--json", "--only", ",".join(MODEL_CHECKS)]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert "fail" in {c["status"] for c in report["checks"]}, proc.stdout[:2000]
