"""causality: a changed future token leaves every earlier logit alone, and moves its own and later ones.

Run twice: without padding (Track B: no mask at all) and with right, left and middle padding in one batch
(Track B: the mask; Track A: a padded source), so a model that peeks only when padding is present is caught.
Outputs at padded query positions are unspecified: only real query positions are compared, and only real
tokens are changed.
"""
import torch

from .. import tolerances as tol
from ..compare import mismatch, nonfinite, shape_problem
from ..configs import FIRST_ORDINARY, SPECIAL, check_config
from .base import Stage, Verdict
from .batches import sequence_key, target_batch
from .sensitivity import independent

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "causality"
TITLE = "No information from future tokens"
HINT = "the causal mask: key j may be attended only when j ≤ i"
ORDER = 50
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("max_leak",)
B, T, S = 4, 10, 9  # S: Track A source length
POSITIONS = (2, 5, 8)
AXES = ("batch", "position", "vocab")
CASES = {"plain": "without padding", "padded": "with right, left and middle padding"}


def padding_mask(length: int) -> torch.Tensor:
    """(B, length) bool, True = real: row 0 unpadded, row 1 right-, row 2 left-, row 3 middle-padded."""
    mask = torch.ones(B, length, dtype=torch.bool)
    mask[1, length - 3:] = False
    mask[2, :2] = False
    mask[3, 4:6] = False
    return mask


def change_at(seq: torch.Tensor, p: int, real: torch.Tensor, span: int) -> torch.Tensor:
    """seq with the token at position p replaced by another ordinary token, in the rows where p is real."""
    changed = seq.clone()
    # shift within the ordinary tokens so the new token always differs from the old one
    new = (seq[:, p] - FIRST_ORDINARY + 1 + p % (span - 1)) % span + FIRST_ORDINARY
    changed[:, p] = torch.where(real[:, p], new, seq[:, p])
    return changed


def plan(ctx):
    """Per case a base batch and one copy per position p with the real token at p replaced."""
    gen = ctx.generator(ID)
    key = sequence_key(ctx.track)
    span = check_config(ctx.track)["vocab_size"] - FIRST_ORDINARY
    inputs = {}
    for case in CASES:
        if ctx.track == "lm":
            real = padding_mask(T) if case == "padded" else torch.ones(B, T, dtype=torch.bool)
            batch = {"ids": ctx.tokens(gen, B, T).masked_fill(~real, SPECIAL["pad_id"])}
            if case == "padded":
                batch["mask"] = real
        else:
            src_mask = padding_mask(S) if case == "padded" else torch.ones(B, S, dtype=torch.bool)
            real = torch.ones(B, T, dtype=torch.bool)  # the decoder sequence itself is never padded
            batch = {"src": ctx.tokens(gen, B, S).masked_fill(~src_mask, SPECIAL["pad_id"]), "src_mask": src_mask,
                     "tgt": target_batch(ctx, gen, B, T)}
        for p in POSITIONS:
            batch[f"{key}_{p}"] = change_at(batch[key], p, real, span)
        inputs.update({f"{case}/{k}": v for k, v in batch.items()})
    return [Stage(ID, "causality", inputs, ctx.model_params(positions=list(POSITIONS), cases=list(CASES)))]


def real_queries(stage, case) -> torch.Tensor:
    """(B, T) bool: the query positions whose outputs the contract specifies in this case."""
    mask = stage.inputs.get(f"{case}/mask")
    return mask if mask is not None else torch.ones(B, T, dtype=torch.bool)


def verdict(ctx, stages, outcomes):
    """Earlier real positions unchanged within 1e-10; own and every later real position changed; in both cases."""
    out, stage = outcomes[ID], stages[ID]
    vocab = check_config(ctx.track)["vocab_size"]
    key = sequence_key(ctx.track)
    v = Verdict(ID)
    bases = {case: out.tensors.get(f"{case}/base") for case in CASES}
    for case, how in CASES.items():
        if v.problem(shape_problem(bases[case], (B, T, vocab), f"the logits {how}", "(B, T, V)")):
            return v.result("")
    plain = bases["plain"]
    if v.problem(nonfinite(plain, "the logits", AXES)):
        return v.result("")
    again = out.tensors.get("plain/base_again")
    if v.problem(shape_problem(again, plain.shape, "the logits of the second pass", "(B, T, V)")):
        return v.result("")
    miss = mismatch(again, plain, axes=AXES, **tol.UNCHANGED)
    if miss:
        v.problem("two eval-mode forward passes on the same batch differ (" + miss.describe("second pass") +
                  "): is dropout or randomness active in eval mode?")
        return v.result("")
    changed = {(case, p): out.tensors.get(f"{case}/changed_{p}") for case in CASES for p in POSITIONS}
    for (case, p), got in changed.items():
        if v.problem(shape_problem(got, (B, T, vocab), f"the logits {CASES[case]} with token {p} changed",
                                   "(B, T, V)")):
            return v.result("")
    moved = torch.stack([changed["plain", p] for p in POSITIONS])  # (P, B, T, V)
    if v.problem(independent(plain.expand_as(moved), moved,
                             f"changing the token at position {', '.join(map(str, POSITIONS))} (one at a time)")):
        return v.result("")
    leak = 0.0
    for case, how in CASES.items():
        real = real_queries(stage, case)  # (B, T)
        zero = torch.zeros((), dtype=torch.float64)
        base = torch.where(real[..., None], bases[case].to(torch.float64), zero)  # padded queries: unspecified
        if v.problem(nonfinite(base, f"the logits at real positions {how}", AXES)):
            continue
        for p in POSITIONS:
            got = torch.where(real[..., None], changed[case, p].to(torch.float64), zero)
            rows = stage.inputs[f"{case}/{key}_{p}"][:, p] != stage.inputs[f"{case}/{key}"][:, p]  # (B,) changed rows
            miss = mismatch(got[:, :p], base[:, :p], axes=AXES, **tol.UNCHANGED)
            if miss:
                leak = max(leak, miss.max_abs)
                v.problem(f"{how}: changing the token at position {p} changed the logits at earlier {miss.location} "
                          f"by {miss.max_abs:.3g}: position {miss.index[1]} can see position {p}; the causal mask must "
                          "allow key j only when j <= i" + (", whatever the padding" if case == "padded" else ""))
            delta = (got - base).abs().amax(dim=-1)  # (B, T): how far each position moved
            if ((delta[:, p] <= tol.CHANGED_MIN) & rows).any():
                b = int(((delta[:, p] <= tol.CHANGED_MIN) & rows).nonzero()[0])
                v.problem(f"{how}: changing the token at position {p} did not change the logits at position {p} "
                          f"(batch {b}): does each position read its own input token?")
            still = ((delta[:, p + 1:] <= tol.CHANGED_MIN) & real[:, p + 1:] & rows[:, None]).nonzero()
            if len(still):
                b, t = still[0].tolist()
                v.problem(f"{how}: changing the token at position {p} did not change the logits at later real "
                          f"position {p + 1 + t} (batch {b}): later positions must be able to attend to earlier tokens")
    v.metrics["max_leak"] = leak
    return v.result(f"changing the token at positions {', '.join(map(str, POSITIONS))} leaves every earlier logit "
                    "unchanged (within 1e-10) and changes its own and every later position, without padding and with "
                    "right, left and middle padding" + (" (padding mask given)" if ctx.track == "lm" else
                                                        " (padded source)"))
