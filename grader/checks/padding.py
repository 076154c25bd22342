"""padding: other IDs at padded positions leave the real positions' outputs unchanged; other real tokens move them."""
import torch

from .. import tolerances as tol
from ..compare import mismatch, shape_problem
from ..configs import SPECIAL, check_config
from .base import Stage, Verdict
from .batches import source_batch, target_batch
from .sensitivity import independent, other_tokens, unmoved

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "padding"
TITLE = "Padding does not leak into real positions"
HINT = "the key padding mask, or a mask inverted (True means allowed)"
ORDER = 60
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("max_abs_diff", "mismatched", "compared", "worst_index")
B, T = 3, 8
AXES = ("batch", "position", "vocab")


def plan(ctx):
    """Track B: right, left and middle padding in one batch; Track A: padded sources. Then new pad IDs."""
    gen = ctx.generator(ID)
    if ctx.track == "lm":
        ids = ctx.tokens(gen, B, T)
        mask = torch.ones(B, T, dtype=torch.bool)
        mask[0, T - 3:] = False  # right padding
        mask[1, :2] = False  # left padding
        mask[2, 3:5] = False  # padding in the middle
        inputs = {"ids": ids.masked_fill(~mask, SPECIAL["pad_id"]), "mask": mask}
        inputs["ids_alt"] = torch.where(mask, ids, ctx.tokens(gen, B, T))
        # other real tokens, pads unchanged: the real positions must move (a model that ignores the IDs earns nothing)
        inputs["ids_real"] = other_tokens(ctx, inputs["ids"], keep=~mask)
    else:
        inputs = source_batch(ctx, gen, B, T - 1, [0, 3, 1])
        inputs["src_alt"] = torch.where(inputs["src_mask"], inputs["src"], ctx.tokens(gen, B, T - 1))
        inputs["src_real"] = other_tokens(ctx, inputs["src"], keep=~inputs["src_mask"])
        inputs["tgt"] = target_batch(ctx, gen, B, T)
    return [Stage(ID, "padding", inputs, ctx.model_params())]


def verdict(ctx, stages, outcomes):
    """Other real tokens move every real position; other pad IDs move none (padded queries are unspecified)."""
    inputs, out = stages[ID].inputs, outcomes[ID]
    vocab = check_config(ctx.track)["vocab_size"]
    v = Verdict(ID)
    base, other = out.tensors.get("base"), out.tensors.get("other")
    if v.problem(shape_problem(base, (B, T, vocab), "the logits", "(B, T, V)")
                 or shape_problem(other, (B, T, vocab), "the logits with other pad IDs", "(B, T, V)")):
        return v.result("")
    real = inputs["mask"] if ctx.track == "lm" else torch.ones(B, T, dtype=torch.bool)
    moved = out.tensors.get("real")
    what = "other real tokens (same padding)" if ctx.track == "lm" else "other real source tokens (same padding)"
    if v.problem(shape_problem(moved, (B, T, vocab), "the logits with other real tokens", "(B, T, V)")
                 or independent(base, moved, what)):
        return v.result("")
    if v.problem(unmoved(base, moved, real, what.replace("other", "changing the", 1))):
        return v.result("")
    keep = real[..., None].expand_as(base)
    zero = torch.zeros((), dtype=base.dtype)
    miss = mismatch(torch.where(keep, other, zero), torch.where(keep, base, zero), axes=AXES, **tol.UNCHANGED)
    if miss:
        what = "padded keys" if ctx.track == "lm" else "padded source tokens"
        v.problem(f"changing only the IDs at padded positions changed the logits at real {miss.location} by "
                  f"{miss.max_abs:.3g}: {what} are being attended to; mask them out (True = real token), and check "
                  "the mask is not inverted")
        v.metrics.update(miss.metrics())
    elif not torch.isfinite(torch.where(keep, base, zero)).all():
        v.problem("the logits at real positions contain NaN or infinity when padding is present")
    where = "right, left and middle padding" if ctx.track == "lm" else "padded sources"
    return v.result(f"with {where}, other IDs at padded positions leave every real position's logits unchanged, "
                    "and other real tokens change them")
