"""kv_cache: one token at a time and in chunks, the cached logits equal the full-prefix logits everywhere."""
import torch

from .. import tolerances as tol
from ..compare import mismatch, nonfinite, shape_problem
from ..configs import check_config
from .base import Stage, Verdict
from .batches import source_batch, target_batch

ID = "kv_cache"
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("step_max_abs_diff", "chunked_max_abs_diff")
B, T = 2, 9
CHUNKS = (3, 1, 4, 1)
AXES = ("batch", "position", "vocab")


def plan(ctx):
    """A sequence (Track A: a target over a padded source) and the chunk sizes to feed it in."""
    gen = ctx.generator(ID)
    if ctx.track == "lm":
        inputs = {"ids": ctx.tokens(gen, B, T)}
    else:
        inputs = {**source_batch(ctx, gen, B, 6, [0, 2]), "tgt": target_batch(ctx, gen, B, T)}
    return [Stage(ID, "kv_cache", inputs, ctx.model_params(chunks=list(CHUNKS)))]


def first_bad_position(got, full) -> int:
    """The first position whose logits are not close."""
    close = ((got - full).abs() <= tol.CACHE["atol"] + tol.CACHE["rtol"] * full.abs()).all(dim=-1).all(dim=0)  # (T,)
    return int((~close).nonzero()[0])


def verdict(ctx, stages, outcomes):
    """Compare each cached run with the full prefix; point at the first position that differs."""
    out = outcomes[ID]
    vocab = check_config(ctx.track)["vocab_size"]
    v = Verdict(ID)
    full = out.tensors.get("full")
    if v.problem(shape_problem(full, (B, T, vocab), "the full-prefix logits", "(B, T, V)")
                 or nonfinite(full, "the full-prefix logits", AXES)):
        return v.result("")
    starts = torch.tensor((0,) + CHUNKS).cumsum(0).tolist()
    for name, how in (("step", "one token at a time"), ("chunked", f"in chunks of {', '.join(map(str, CHUNKS))}")):
        got = out.tensors.get(name)
        if v.problem(shape_problem(got, full.shape, f"the cached logits ({how})", "(B, T, V)")):
            continue
        miss = mismatch(got, full, axes=AXES, **tol.CACHE)
        if miss:
            t = first_bad_position(got, full)
            hint = ("the first call, without a cache, already differs: is the cache changing the output?" if t == 0 else
                    f"position {t} is the first that reads the cache: the new token at absolute position {t} must "
                    "use position {t} (RoPE offset), not 0, and the cached keys must come before the new ones")
            if name == "chunked" and t in starts:
                hint += "; within a chunk the new tokens must also be causally masked among themselves"
            v.problem(f"decoding {how} with the cache: " + miss.describe("cached logits against full-prefix logits")
                      + f"; first wrong position {t}: " + hint.replace("{t}", str(t)))
            v.metrics[f"{name}_max_abs_diff"] = miss.max_abs
    return v.result(f"cached logits equal the full-prefix logits at all {T} positions, one token at a time and in "
                    f"chunks of {', '.join(map(str, CHUNKS))}")
