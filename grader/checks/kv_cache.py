"""kv_cache: one token at a time and in chunks, the cached logits equal the full-prefix logits up to max_len."""
import torch

from .. import tolerances as tol
from ..compare import mismatch, nonfinite, shape_problem
from ..configs import check_config
from .base import Stage, Verdict
from .batches import source_batch, target_batch
from .sensitivity import independent, other_tokens

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "kv_cache"
TITLE = "Cached decoding equals full-prefix decoding"
HINT = "positions after the cache (absolute, not from 0), cache order, the causal mask within a chunk"
ORDER = 70
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("step_max_abs_diff", "chunked_max_abs_diff")
B = 2
T = check_config("lm")["max_len"]  # every position the contract allows (64): a cache that keeps a window fails
CHUNK_SIZES = (2, 9)  # chunk lengths are drawn from this range (inclusive) by the judge, per grading
AXES = ("batch", "position", "vocab")


def draw_chunks(gen) -> list[int]:
    """Random chunk lengths in CHUNK_SIZES that add up to T (the last one cut to fit)."""
    chunks = []
    while sum(chunks) < T:
        size = int(torch.randint(CHUNK_SIZES[0], CHUNK_SIZES[1] + 1, (), generator=gen))
        chunks.append(min(size, T - sum(chunks)))
    return chunks


def plan(ctx):
    """A sequence (Track A: a target over a padded source), a second one, and the chunk sizes to feed it in."""
    gen = ctx.generator(ID)
    if ctx.track == "lm":
        inputs = {"ids": ctx.tokens(gen, B, T)}
    else:
        inputs = {**source_batch(ctx, gen, B, 6, [0, 2]), "tgt": target_batch(ctx, gen, B, T)}
    # the full-prefix logits of a second sequence must differ: a constant model's cache is trivially "equal"
    inputs.update({f"{k}_other": other_tokens(ctx, inputs[k]) for k in ("ids", "src", "tgt") if k in inputs})
    return [Stage(ID, "kv_cache", inputs, ctx.model_params(chunks=draw_chunks(gen)))]


def first_bad_position(got, full) -> int:
    """The first position whose logits are not close."""
    close = ((got - full).abs() <= tol.CACHE["atol"] + tol.CACHE["rtol"] * full.abs()).all(dim=-1).all(dim=0)  # (T,)
    return int((~close).nonzero()[0])


def verdict(ctx, stages, outcomes):
    """The logits depend on the input; compare each cached run with the full prefix; point at the first bad position."""
    out = outcomes[ID]
    vocab = check_config(ctx.track)["vocab_size"]
    v = Verdict(ID)
    full, other = out.tensors.get("full"), out.tensors.get("full_other")
    if v.problem(shape_problem(full, (B, T, vocab), "the full-prefix logits", "(B, T, V)")
                 or nonfinite(full, "the full-prefix logits", AXES)
                 or shape_problem(other, (B, T, vocab), "the full-prefix logits of the second sequence", "(B, T, V)")
                 or independent(full, other, "two sequences that differ in every ordinary token")):
        return v.result("")
    chunks = [int(c) for c in stages[ID].params["chunks"]]
    starts = torch.tensor([0] + chunks).cumsum(0).tolist()
    for name, how in (("step", "one token at a time"), ("chunked", f"in chunks of {', '.join(map(str, chunks))}")):
        got = out.tensors.get(name)
        if v.problem(shape_problem(got, full.shape, f"the cached logits ({how})", "(B, T, V)")):
            continue
        miss = mismatch(got, full, axes=AXES, **tol.CACHE)
        if miss:
            t = first_bad_position(got, full)
            hint = ("the first call, without a cache, already differs: is the cache changing the output?" if t == 0 else
                    f"the new token at absolute position {t} must use position {t} (RoPE offset), not 0, and attend "
                    f"to the cached keys and values of all {t} earlier positions (the cache must keep every position "
                    "up to max_len, not a window), placed before the new ones")
            if name == "chunked" and t in starts:
                hint += "; within a chunk the new tokens must also be causally masked among themselves"
            v.problem(f"decoding {how} with the cache: " + miss.describe("cached logits against full-prefix logits")
                      + f"; first wrong position {t}: " + hint)
            v.metrics[f"{name}_max_abs_diff"] = miss.max_abs
    return v.result(f"cached logits equal the full-prefix logits at all {T} positions (max_len), one token at a time "
                    f"and in chunks of {', '.join(map(str, chunks))}")
