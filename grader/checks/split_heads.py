"""split_heads / merge_heads: exact round trip, channel layout per head, ValueError on a bad width."""
import torch

from .. import tolerances as tol
from ..compare import mismatch, nonfinite, shape_problem
from .base import Stage, Verdict, raised_problem

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "split_heads"
TITLE = "Head split and merge"
HINT = "the reshape in split_heads: reshape to (B, T, H, Dh), then transpose(1, 2)"
ORDER = 10
FUNCTIONS = ("split_heads", "merge_heads")  # the contract functions it tests on their own
NEEDS_TRACK = False
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("max_abs_diff", "mismatched", "compared", "worst_index")
B, T, H, DH = 2, 5, 4, 6


def plan(ctx):
    """A (B, T, H*Dh) input with odd sizes, its correct split, and a width that does not divide."""
    gen = ctx.generator(ID)
    x = torch.randn(B, T, H * DH, generator=gen, dtype=torch.float64)
    x_split = x.view(B, T, H, DH).transpose(1, 2).contiguous()  # (B, H, T, Dh)
    x_bad = torch.randn(B, T, H * DH + 2, generator=gen, dtype=torch.float64)
    return [Stage(ID, "split_heads", {"x": x, "x_split": x_split, "x_bad": x_bad}, {"heads": H})]


def verdict(ctx, stages, outcomes):
    """Compare against the judge's own split; explain the usual reshape mistake."""
    inputs, out = stages[ID].inputs, outcomes[ID]
    x, x_split = inputs["x"], inputs["x_split"]
    v = Verdict(ID)
    split = out.tensors.get("split")
    if not v.problem(shape_problem(split, x_split.shape, "split_heads(x, H)", "(B, H, T, Dh)")):
        miss = mismatch(split, x_split, axes=("batch", "head", "position", "channel"), **tol.EXACT)
        if miss:
            b, h, t, _ = miss.index
            hint = ""
            if torch.equal(split, x.reshape(B, H, T, DH)):
                hint = (" It equals x.reshape(B, H, T, Dh): reshape to (B, T, H, Dh) first, then transpose(1, 2),"
                        " so each head keeps its own channels of every position.")
            v.problem(f"split_heads(x, {H})[{b}, {h}, {t}] should be x[{b}, {t}, {h * DH}:{(h + 1) * DH}] "
                      f"(head {h} holds channels {h * DH}..{(h + 1) * DH - 1} of position {t}); "
                      + miss.describe("compared with the correct split") + "." + hint)
            v.metrics.update(miss.metrics())
    back = out.tensors.get("roundtrip")
    if not v.problem(shape_problem(back, x.shape, "merge_heads(split_heads(x, H))", "(B, T, D)")):
        miss = mismatch(back, x, axes=("batch", "position", "channel"), **tol.EXACT)
        v.problem(miss and "merge_heads(split_heads(x)) is not x exactly: " + miss.describe("round trip"))
    merged = out.tensors.get("merged")
    if not v.problem(shape_problem(merged, x.shape, "merge_heads(x_split)", "(B, T, H*Dh)")):
        miss = mismatch(merged, x, axes=("batch", "position", "channel"), **tol.EXACT)
        v.problem(miss and "merge_heads of a correct split does not give back x: "
                  + miss.describe("merge_heads") + "; merge must transpose(1, 2) back, then reshape to (B, T, H*Dh)")
    v.problem(nonfinite(split, "split_heads output", ("batch", "head", "position", "channel")))
    v.problem(raised_problem(out, "bad_width", f"split_heads(x, {H}) with width {H * DH + 2}"))
    return v.result(f"split_heads and merge_heads are exact inverses on (B={B}, T={T}, D={H * DH}), H={H}, "
                    "and a width that does not divide raises ValueError")
