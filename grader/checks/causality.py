"""causality: a changed future token leaves every earlier logit alone, and moves its own and later ones."""
from .. import tolerances as tol
from ..compare import mismatch, nonfinite, shape_problem
from ..configs import FIRST_ORDINARY, check_config
from .base import Stage, Verdict
from .batches import model_batch, sequence_key

ID = "causality"
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("max_leak",)
B, T = 2, 8
POSITIONS = (2, 5, 7)
AXES = ("batch", "position", "vocab")


def plan(ctx):
    """The base batch and one copy per position p with the token at p replaced by another ordinary token."""
    gen = ctx.generator(ID)
    inputs = model_batch(ctx, gen, B, T)
    key = sequence_key(ctx.track)
    span = check_config(ctx.track)["vocab_size"] - FIRST_ORDINARY
    for p in POSITIONS:
        changed = inputs[key].clone()
        # shift within the ordinary tokens so the new token always differs from the old one
        changed[:, p] = (changed[:, p] - FIRST_ORDINARY + 1 + p % (span - 1)) % span + FIRST_ORDINARY
        inputs[f"{key}_{p}"] = changed
    return [Stage(ID, "causality", inputs, ctx.model_params(positions=list(POSITIONS)))]


def verdict(ctx, stages, outcomes):
    """Earlier positions unchanged within 1e-10; own and every later position changed."""
    out = outcomes[ID]
    vocab = check_config(ctx.track)["vocab_size"]
    v = Verdict(ID)
    base = out.tensors.get("base")
    if v.problem(shape_problem(base, (B, T, vocab), "the logits", "(B, T, V)")) or v.problem(nonfinite(base, "the logits", AXES)):
        return v.result("")
    miss = mismatch(out.tensors.get("base_again"), base, axes=AXES, **tol.UNCHANGED)
    if miss:
        v.problem("two eval-mode forward passes on the same batch differ (" + miss.describe("second pass") +
                  "): is dropout or randomness active in eval mode?")
        return v.result("")
    leak = 0.0
    for p in POSITIONS:
        changed = out.tensors.get(f"changed_{p}")
        if v.problem(shape_problem(changed, base.shape, f"the logits with token {p} changed", "(B, T, V)")):
            continue
        delta = (changed - base).abs().amax(dim=-1)  # (B, T): how far each position moved
        miss = mismatch(changed[:, :p], base[:, :p], axes=AXES, **tol.UNCHANGED)
        if miss:
            leak = max(leak, miss.max_abs)
            v.problem(f"changing the token at position {p} changed the logits at earlier {miss.location} by "
                      f"{miss.max_abs:.3g}: position {miss.index[1]} can see position {p}; the causal mask must allow "
                      "key j only when j <= i")
        if (delta[:, p] <= tol.CHANGED_MIN).any():
            v.problem(f"changing the token at position {p} did not change the logits at position {p}: "
                      "does each position read its own input token?")
        still = (delta[:, p + 1:] <= tol.CHANGED_MIN).nonzero()
        if len(still):
            b, t = still[0].tolist()
            v.problem(f"changing the token at position {p} did not change the logits at later position {p + 1 + t} "
                      f"(batch {b}): later positions must be able to attend to earlier tokens")
    v.metrics["max_leak"] = leak
    return v.result(f"changing the token at positions {', '.join(map(str, POSITIONS))} leaves every earlier logit "
                    "unchanged (within 1e-10) and changes its own and every later position")
