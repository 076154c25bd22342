"""no_shortcuts: no nn.Transformer*, nn.MultiheadAttention, SDPA, multi_head_attention_forward or torch.nn.attention."""
import torch

from ..source import shortcut_uses
from .base import Stage, Verdict
from .batches import model_batch

ID = "no_shortcuts"
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
    """Fail on any forbidden name in the source (outside docstrings) or any recorded call."""
    v = Verdict(ID)
    static = shortcut_uses(ctx.source.tree)
    calls = outcomes[ID].facts.get("calls")
    if static:
        v.problem("the source uses a forbidden shortcut: " + "; ".join(static[:5]) +
                  " (attention must be built from projections, scores, softmax and value mixing)")
    if isinstance(calls, list) and calls:
        v.problem("calls to forbidden shortcuts were recorded while running the submission: " + ", ".join(map(str, calls)))
    v.metrics.update(static_hits=len(static), recorded_calls=len(calls) if isinstance(calls, list) else 0)
    return v.result("no forbidden shortcut in the source, and none called at run time")
