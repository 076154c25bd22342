"""Correct submissions in other styles (submissions/variants/) pass every check, not just the references' style.

The stricter model checks must not punish a correct model written differently: rotate-half, complex and
interleaved RoPE, post-norm, RMSNorm/SwiGLU, tied embeddings, fused projections, per-row positions.
"""
import ast

import pytest

from tests.support.grading import SUBMISSIONS, explain, grade_text, statuses
from grader.checks import ALL_IDS

pytestmark = pytest.mark.slow

VARIANTS = sorted(p.stem for p in (SUBMISSIONS / "variants").glob("*.py"))
FAST_SKIP = ("training", "evaluation")  # the slow checks run once per track below
# one variant per track graded with every check, training and evaluation included
FULL = {"lm": "lm_complex_rmsnorm_swiglu", "reverse": "reverse_rmsnorm_swiglu_tied"}


def text(name: str) -> str:
    return (SUBMISSIONS / "variants" / f"{name}.py").read_text()


def track(name: str) -> str:
    """The TRACK a variant declares, read without running it."""
    for node in ast.parse(text(name)).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "TRACK":
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} declares no TRACK")


def test_there_are_variants_on_both_tracks():
    assert len(VARIANTS) >= 4, VARIANTS
    assert {track(v) for v in VARIANTS} == {"lm", "reverse"}
    assert set(FULL.values()) <= set(VARIANTS)


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_passes_every_check_but_training(name):
    report = grade_text(text(name), skip=FAST_SKIP)
    assert report["submission"]["track"] == track(name)
    assert set(statuses(report)) == set(ALL_IDS) - set(FAST_SKIP)
    assert set(statuses(report).values()) == {"pass"}, explain(report)


@pytest.mark.parametrize("name", sorted(FULL.values()))
def test_variant_passes_every_check_with_training(name):
    report = grade_text(text(name))
    assert set(statuses(report)) == set(ALL_IDS)
    assert set(statuses(report).values()) == {"pass"}, explain(report)
