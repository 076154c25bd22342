"""attention against torch's SDPA (math backend) in float64, on four masks, plus its error on an empty row."""
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from .. import tolerances as tol
from ..compare import mismatch, nonfinite, shape_problem
from .base import Stage, Verdict, raised_problem

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "attention_sdpa"
TITLE = "Attention equals scaled dot-product attention"
HINT = "the softmax axis (must be the keys), the 1/√Dh scale, masked_fill with −∞"
ORDER = 20
FUNCTIONS = ("attention",)  # the contract functions it tests on their own
NEEDS_TRACK = False
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("max_abs_diff",)
B, H, TQ, TK, DH = 2, 3, 5, 7, 8
CASES = ("none", "causal", "padding", "random")
AXES = ("batch", "head", "query", "key")


def plan(ctx):
    """Random q, k, v and one boolean mask per case (True = may attend)."""
    gen = ctx.generator(ID)
    q = torch.randn(B, H, TQ, DH, generator=gen, dtype=torch.float64)
    k = torch.randn(B, H, TK, DH, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H, TK, DH, generator=gen, dtype=torch.float64)
    causal = torch.ones(TQ, TK, dtype=torch.bool).tril(diagonal=TK - TQ)  # (Tq, Tk), queries aligned to the end
    padding = torch.ones(B, 1, 1, TK, dtype=torch.bool)
    padding[1, ..., TK - 3:] = False  # batch 1 has three padded keys
    random = torch.rand(B, H, TQ, TK, generator=gen) < 0.5
    random[..., 0] |= ~random.any(-1)  # every row keeps at least one key
    empty = causal.clone().expand(B, 1, TQ, TK).clone()
    empty[0, 0, 2] = False  # one query row with no allowed key
    inputs = {"q": q, "k": k, "v": v, "mask_causal": causal, "mask_padding": padding,
              "mask_random": random, "mask_empty": empty}
    return [Stage(ID, "attention", inputs, {"cases": list(CASES)})]


def reference(q, k, v, mask, scale=None):
    """The judge's own (out, weights): SDPA math backend, and softmax of masked scaled scores."""
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)  # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, scores.softmax(dim=-1)


def diagnose(q, k, v, mask, weights) -> str:
    """Name the usual mistake when the weights match one."""
    _, unscaled = reference(q, k, v, mask, scale=1.0)
    if weights.shape == unscaled.shape and torch.allclose(weights, unscaled, **tol.ATTENTION):
        return " The weights equal softmax(q·kᵀ) without the 1/√Dh scale: divide the scores by √Dh."
    if torch.allclose(weights.sum(dim=-2), torch.ones(()).double(), atol=1e-6):
        return " The weights sum to one over the query axis: take the softmax over the key axis (dim=-1)."
    return ""


def verdict(ctx, stages, outcomes):
    """Outputs and weights against the reference, rows summing to one, masked weights exactly zero."""
    inputs, out = stages[ID].inputs, outcomes[ID]
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    verdict_ = Verdict(ID)
    worst = 0.0
    for case in CASES:
        mask = inputs.get("mask_" + case)
        ref_out, ref_w = reference(q, k, v, mask)
        got_out, got_w = out.tensors.get("out_" + case), out.tensors.get("weights_" + case)
        if verdict_.problem(shape_problem(got_out, ref_out.shape, f"attention output (mask {case})", "(B, H, Tq, Dh)")
                            or shape_problem(got_w, ref_w.shape, f"attention weights (mask {case})", "(B, H, Tq, Tk)")):
            continue
        if verdict_.problem(nonfinite(got_w, f"weights (mask {case})", AXES)
                            or nonfinite(got_out, f"output (mask {case})", AXES[:3] + ("channel",))):
            continue
        miss_w = mismatch(got_w, ref_w, axes=AXES, **tol.ATTENTION)
        if miss_w:
            verdict_.problem(miss_w.describe(f"attention weights with mask {case!r} against softmax(q·kᵀ/√Dh)")
                             + "." + diagnose(q, k, v, mask, got_w))
            worst = max(worst, miss_w.max_abs)
        miss_o = mismatch(got_out, ref_out, axes=AXES[:3] + ("channel",), **tol.ATTENTION)
        if miss_o:
            verdict_.problem(miss_o.describe(f"attention output with mask {case!r} against SDPA (math backend)"))
            worst = max(worst, miss_o.max_abs)
        row_err = (got_w.sum(-1) - 1).abs()
        if row_err.max() > tol.ROW_SUM:
            verdict_.problem(f"attention weights with mask {case!r}: a row sums to {float(got_w.sum(-1).flatten()[row_err.argmax()]):.6g}, not 1")
        if mask is not None:
            leaked = got_w.masked_select(~mask.expand_as(got_w))
            if (leaked != 0).any():
                verdict_.problem(f"attention weights with mask {case!r}: {int((leaked != 0).sum())} disallowed weights "
                                 f"are not exactly 0 (largest {float(leaked.abs().max()):.3g}); fill disallowed scores "
                                 "with -inf before the softmax")
    verdict_.metrics["max_abs_diff"] = worst
    verdict_.problem(raised_problem(out, "empty_row", "attention with a query row that has no allowed key"))
    return verdict_.result("attention equals SDPA within atol 1e-10, rtol 1e-8 for no mask, causal, padding and "
                           "random masks; rows sum to 1; masked weights are exactly 0; an empty row raises ValueError")
