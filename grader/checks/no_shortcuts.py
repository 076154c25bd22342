"""no_shortcuts: no forbidden attention shortcut, and no construct that could hide which function is called.

Two layers. The judge reads the source's AST (grader.shortcuts), never running it: forbidden names, through
aliases, and every dynamic access (a computed getattr, __dict__, vars(), eval, importlib, torch.ops, ...) fail
with their line. The run-time trap in the sandbox records calls of the wrapped functions and, below them, of
aten ops and kernels whose names are attention shortcuts.
"""
import torch

from ..shortcuts import shortcut_uses
from .base import Stage, Verdict
from .batches import model_batch

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "no_shortcuts"
TITLE = "No library attention or transformer shortcuts"
HINT = "build attention yourself: no nn.MultiheadAttention, nn.Transformer* or scaled_dot_product_attention"
ORDER = 90
NEEDS_TRACK = False
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("static_hits", "recorded_calls")


def plan(ctx):
    """Run every function and, when the track is known, a model forward, with the shortcuts wired to record calls."""
    gen = ctx.generator(ID)
    inputs = {"x": torch.randn(1, 3, 8, generator=gen, dtype=torch.float64),
              "q": torch.randn(1, 2, 3, 4, generator=gen, dtype=torch.float64), "pos": torch.arange(3)}
    params = {"heads": 2, "track": None}
    if ctx.track:
        inputs.update(model_batch(ctx, gen, 2, 6))
        params = ctx.model_params(heads=2)
    return [Stage(ID, "shortcuts", inputs, params)]


def verdict(ctx, stages, outcomes):
    """Fail on any forbidden or hiding construct in the source (outside docstrings) or any recorded call."""
    v = Verdict(ID)
    static = shortcut_uses(ctx.source.tree)
    calls = outcomes[ID].facts.get("calls")  # a list of short labels: grader.frames checked it
    if static:
        more = f" (and {len(static) - 5} more)" if len(static) > 5 else ""
        v.problem("the source uses a forbidden shortcut or hides what it calls: " + "; ".join(static[:5]) + more +
                  " (attention must be built from projections, scores, softmax and value mixing, and every "
                  "function called by its written name; see docs/contract.md)")
    if isinstance(calls, list) and calls:
        v.problem("calls to forbidden shortcuts were recorded while running the submission: " + ", ".join(calls[:8]))
    v.metrics.update(static_hits=len(static), recorded_calls=len(calls) if isinstance(calls, list) else 0)
    return v.result("no forbidden shortcut or hidden call in the source, and none called at run time")
