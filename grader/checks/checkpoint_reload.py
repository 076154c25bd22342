"""checkpoint_reload: the state dict, rebuilt in a fresh process under another seed, gives the same logits."""
import torch

from .. import tolerances as tol
from ..compare import mismatch, nonfinite, shape_problem
from ..configs import check_config
from .base import Stage, Verdict
from .batches import model_batch
from .sensitivity import independent, other_tokens

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "checkpoint_reload"
TITLE = "Checkpoint reloads to equal logits"
HINT = "random tensors that are neither parameters nor persistent buffers"
ORDER = 80
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("state_entries", "max_abs_diff", "mismatched", "compared", "worst_index")
B, T = 2, 8
AXES = ("batch", "position", "vocab")
SAVE, LOAD = ID + ".save", ID + ".load"


def plan(ctx):
    """Stage one builds and saves; stage two, a fresh child with another seed, rebuilds and loads strictly."""
    inputs = model_batch(ctx, ctx.generator(ID), B, T)
    # a second batch: the reloaded logits must differ between the two (a constant model reloads trivially)
    inputs.update({f"{k}_other": other_tokens(ctx, inputs[k]) for k in ("ids", "src", "tgt") if k in inputs})
    other_seed = ctx.public_seed("checkpoint_reload.other")
    return [Stage(SAVE, "checkpoint_save", inputs, ctx.model_params()),
            Stage(LOAD, "checkpoint_load", inputs, ctx.model_params(seed=other_seed), input_from=SAVE)]


def verdict(ctx, stages, outcomes):
    """The reloaded logits depend on the input and equal the original ones, on both batches."""
    before, after = outcomes[SAVE].tensors.get("logits"), outcomes[LOAD].tensors.get("logits")
    before_other, after_other = outcomes[SAVE].tensors.get("logits_other"), outcomes[LOAD].tensors.get("logits_other")
    v = Verdict(ID)
    vocab = check_config(ctx.track)["vocab_size"]
    if v.problem(shape_problem(before, (B, T, vocab), "the logits", "(B, T, V)")
                 or nonfinite(before, "the logits", AXES)):
        return v.result("")
    if v.problem(shape_problem(after, before.shape, "the reloaded model's logits", "the original shape")
                 or shape_problem(before_other, before.shape, "the logits on the second batch", "the original shape")
                 or shape_problem(after_other, before.shape, "the reloaded model's logits on the second batch",
                                  "the original shape")
                 or independent(after, after_other, "the reloaded model on two batches that differ in every ordinary "
                                                    "token")):
        return v.result("")
    miss = mismatch(torch.stack((after, after_other)), torch.stack((before, before_other)), axes=("batch set",) + AXES,
                    **tol.RELOAD)
    if miss:
        v.problem(miss.describe("logits after state_dict reload in a fresh process (other seed) against before") +
                  ": something the forward pass uses is not in the state dict (a plain tensor attribute, a "
                  "non-persistent buffer drawn at random, or state kept at module level)")
        v.metrics.update(miss.metrics())
    keys = [k for k in outcomes[SAVE].tensors if k.startswith("state/")]
    v.metrics["state_entries"] = len(keys)
    return v.result(f"the {len(keys)}-entry state dict, loaded with strict=True into a model built in a fresh "
                    "process under another seed, gives identical logits")
