"""gradient_path: one backward pass reaches every trainable parameter with a finite, nonzero gradient."""
import torch

from ..compare import shape_problem
from ..configs import check_config
from .base import Stage, Verdict
from .batches import model_batch
from .sensitivity import independent, other_tokens

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "gradient_path"
TITLE = "Every parameter gets a gradient"
HINT = ".detach(), torch.no_grad(), .data, or layers the forward pass never uses"
ORDER = 40
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("parameters", "without_gradient", "nonfinite", "all_zero")
B, T = 2, 7


def plan(ctx):
    """A batch and a random weighting of the logits, so the loss touches every output."""
    gen = ctx.generator(ID)
    inputs = model_batch(ctx, gen, B, T)
    # a second batch with every ordinary token changed: the logits must move (a constant model earns nothing)
    inputs.update({f"{k}_other": other_tokens(ctx, inputs[k]) for k in ("ids", "src", "tgt") if k in inputs})
    inputs["weight"] = torch.randn(B, T, check_config(ctx.track)["vocab_size"], generator=gen, dtype=torch.float64)
    return [Stage(ID, "gradient", inputs, ctx.model_params())]


def verdict(ctx, stages, outcomes):
    """The logits depend on the input; then name each parameter with no gradient, a non-finite one, or only zeros."""
    out = outcomes[ID]
    trainable, no_grad = out.facts.get("trainable"), out.facts.get("no_grad")
    v = Verdict(ID)
    if not isinstance(trainable, list) or not isinstance(no_grad, list):
        v.problem("the probe did not report the parameters (was it tampered with?)")
        return v.result("")
    logits, other = out.tensors.get("logits"), out.tensors.get("logits_other")
    if v.problem(shape_problem(logits, tuple(stages[ID].inputs["weight"].shape), "the logits", "(B, T, V)")
                 or shape_problem(other, tuple(logits.shape), "the logits on the second batch", "(B, T, V)")
                 or independent(logits, other, "two batches that differ in every ordinary token")):
        return v.result("")
    if not trainable:
        v.problem("the model has no trainable parameters")
    none, bad, zero = [str(n) for n in no_grad], [], []
    for name in trainable:
        if name in none:
            continue
        grad = out.tensors.get("grad/" + str(name))
        if grad is None:
            none.append(str(name))
        elif not torch.isfinite(grad).all():
            bad.append(str(name))
        elif not (grad != 0).any():
            zero.append(str(name))
    v.problem(none and f"no gradient reached {', '.join(none[:6])}{' …' if len(none) > 6 else ''}: "
              "is it detached (.detach(), torch.no_grad, .data) or unused in forward?")
    v.problem(bad and f"non-finite gradient in {', '.join(bad[:6])}")
    v.problem(zero and f"the gradient of {', '.join(zero[:6])} is zero everywhere: is its output masked out or multiplied by 0?")
    v.metrics.update(parameters=len(trainable), without_gradient=len(none), nonfinite=len(bad), all_zero=len(zero))
    return v.result(f"all {len(trainable)} trainable parameters get a finite, nonzero gradient from one backward pass")
