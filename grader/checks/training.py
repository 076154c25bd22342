"""training: the judge trains the submission's model for a short seeded CPU run, and checks every answer it used.

The judge keeps the weights and runs the optimizer (AdamW, clipping at 1.0, its own batches). The sandbox
that trains only answers: the initial weights build_model makes under the seed, then each step's logits
and gradient at the weights the judge sends. Afterwards a fresh sandbox rebuilds the model under the same
seed (it must give the same initial weights), recomputes the logits at steps the judge drew in secret (they
must equal the training sandbox's), gives float64 logits a small step either way along a direction the judge
chose (the judge's central difference of its own loss must agree with the returned gradient), and gives the
logits on fixed training rows at the first and last weights, from which the judge computes the losses it
grades on, against a unigram baseline fitted on the training targets.
"""
import math

import torch
import torch.nn.functional as F

from ..compare import nonfinite, shape_problem
from ..configs import ARCH, SPECIAL, TRAIN_MODEL, TRAINING_LIMITS, training_hp
from ..data.reverse import exact_matches, reverse_rows
from ..data.text import random_windows, shipped_corpus, unigram_logprobs
from ..feed import Feed
from ..trainer import Trainer, direction_generator, verification_steps
from .base import Stage, Verdict

# The check's declaration, read by grader/registry.py without importing this module (docs/adding-a-check.md)
ID = "training"
TITLE = "Short seeded CPU run learns and reproduces"
HINT = ("the forward pass in train mode, the loss targets (shifted by one for lm; PAD ignored), "
        "anything random outside the seeded generator")
ORDER = 100
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("final_loss", "baseline_loss", "loss_ratio", "initial_loss", "reported_final_loss",
           "train_token_accuracy", "train_exact_teacher_forced", "train_exact_greedy", "oracle_loss", "floor_ratio",
           "steps", "parameters", "loss_curve", "grad_norm_curve", "loss_curve_every", "verified_steps",
           "gradient_max_rel_error")
RUN, VERIFY = ID + ".run", ID + ".verify"
CURVE_POINTS = 100
AXES = ("row", "position", "vocab")
PAD = SPECIAL["pad_id"]
# Steps checked in a fresh sandbox besides the first and the last, and the finite-difference step along a unit
# direction. Measured on the references (docs/training.md): the central difference and the returned gradient
# agree to 3e-5 of the slope or better (1e-2 leaves room for models that compute parts in float32); a forged
# gradient is off by its own size.
CHECKED_STEPS = 6
FD_EPS = 1e-3
FD_RTOL, FD_ATOL = 0.01, 1e-5
LOGITS_ATOL = 1e-5  # same weights, same batch, same code and threads: the logits agree bit for bit in practice


def train_config(track: str) -> dict:
    """The contract config the training run builds (Track B's vocabulary comes from the shipped corpus)."""
    config = {"arch": ARCH[track], **TRAIN_MODEL[track]}
    if track == "lm":
        config["vocab_size"] = shipped_corpus().vocab.size
    return config


def train_params(ctx, **extra) -> dict:
    """Probe parameters: track, config and the build seed (derived: the grading's own seed stays with the judge)."""
    hp = training_hp(ctx.track, ctx.steps)
    config = train_config(ctx.track)
    return {"track": ctx.track, "config": config, "seed": ctx.public_seed(ID), "vocab_size": config["vocab_size"],
            "steps": hp["steps"], **extra}


def train_inputs(ctx) -> dict:
    """The training rows, the batch index of every step, and fixed training rows (inputs) for the judge's loss."""
    hp = training_hp(ctx.track, ctx.steps)
    batches = hp["steps"], hp["batch_size"]
    if ctx.track == "lm":
        train_ids = shipped_corpus().ids("train")
        rows = random_windows(train_ids, ctx.generator(ID + ".windows"), batches[0] * batches[1], hp["context"])
        check = random_windows(train_ids, ctx.generator(ID + ".check"), hp["check_rows"], hp["context"])
        return {"rows": rows, "targets": rows[:, 1:].contiguous(), "check_inputs": check[:, :-1].contiguous(),
                "check_targets": check[:, 1:].contiguous(), "batches": torch.arange(rows.shape[0]).view(*batches)}
    data = reverse_rows(ctx.generator(ID + ".rows"), hp["train_rows"], TRAIN_MODEL["reverse"]["vocab_size"],
                        hp["min_len"], hp["max_len"])
    n = hp["check_rows"]
    return {**data, "batches": torch.randint(0, hp["train_rows"], batches, generator=ctx.generator(ID + ".batches")),
            **{"check_" + k: data[k][:n].clone() for k in ("src", "src_mask", "tgt_in")},
            "check_targets": data["tgt_out"][:n].clone()}


def sandbox_inputs(inputs: dict) -> dict:
    """What the sandbox gets of the training data: everything but the fixed rows' targets (the judge's)."""
    return {k: v for k, v in inputs.items() if k != "check_targets"}


def step_targets(track: str, inputs: dict):
    """step -> (B, T) targets of that step's batch, for the judge's loss."""
    key = "targets" if track == "lm" else "tgt_out"
    return lambda step: inputs[key][inputs["batches"][step]]


def make_trainer(key: str, track: str, hp: dict, inputs: dict, vocab: int, secret: str) -> Trainer:
    """The judge's side of one training run (training's, or the cyclic task's)."""
    batch = inputs["batches"][0]
    length = (inputs["rows"].shape[1] - 1) if track == "lm" else inputs["tgt_in"].shape[1]
    return Trainer(key, hp, step_targets(track, inputs), vocab, PAD,
                   verification_steps(secret, key, int(hp["steps"]), CHECKED_STEPS), (batch.numel(), length))


def secret_of(ctx) -> str:
    """What the judge draws its checked steps and directions from: the grading's seed (never sent) and the
    submission's hash, so a probe of which steps are checked tells nothing about the next upload."""
    return f"{ctx.seed}/{ctx.source.sha256}"


def run_stage(ctx) -> Stage:
    """The training run (one per grading, shared with `evaluation`, which uses the judge's final weights)."""
    def make():
        hp = training_hp(ctx.track, ctx.steps)
        inputs = train_inputs(ctx)
        trainer = make_trainer(RUN, ctx.track, hp, inputs, train_config(ctx.track)["vocab_size"], secret_of(ctx))
        return Stage(RUN, "train", sandbox_inputs(inputs), train_params(ctx), budget_s=hp["budget_s"],
                     trainer=trainer, data=inputs)  # data: the judge's full copy, check targets included
    return ctx.stage_once(RUN, make)


def verify_stage(run: Stage, key: str, secret: str, track: str | None = None) -> Stage:
    """The fresh sandbox's checks of a training run: per checked step the judge's weights and direction (the
    first weights with the first step), then the last weights, each sent once the run has got there
    (grader/feed.py)."""
    steps = sorted(run.trainer.check_steps)
    params = dict(run.params, steps=steps, eps=FD_EPS, track=track or run.params["track"], fed=True)
    run.directions = {}

    def tensors(step: int) -> dict:
        trainer = run.trainer
        if step < 0:
            return {f"last/{k}": v for k, v in trainer.final_weights().items()}
        run.directions[step] = trainer.direction(step, direction_generator(secret, key, step))
        first = {f"first/{k}": v for k, v in trainer.first.items()} if step == steps[0] else {}
        return {**first, **{f"w{step}/{k}": v for k, v in trainer.kept[step]["weights"].items()},
                **{f"d{step}/{k}": v for k, v in run.directions[step].items()}}
    return Stage(key, "verify_training", dict(run.inputs), params, fresh=True, needs=(run.key,),
                 feed=Feed(run, tensors, [*steps, -1]))


def plan(ctx):
    """The run (the judge trains), then its checks in a fresh sandbox."""
    run = run_stage(ctx)
    return [run, ctx.stage_once(VERIFY, lambda: verify_stage(run, VERIFY, secret_of(ctx)))]


def train_targets(track: str, inputs: dict) -> torch.Tensor:
    """Every training target the loop could see (for the unigram baseline)."""
    return inputs["targets"] if track == "lm" else inputs["tgt_out"]


def mean_ce(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """The judge's mean cross-entropy over non-PAD targets, in float64."""
    return float(F.cross_entropy(logits.double().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=PAD))


def unigram_ce(train: torch.Tensor, targets: torch.Tensor, vocab: int) -> float:
    """Cross-entropy of a unigram model fitted on the training targets, on targets (PAD ignored)."""
    logp = unigram_logprobs(train[train != PAD], vocab)
    return float(-logp[targets[targets != PAD]].mean())


def curve(losses: torch.Tensor) -> tuple[list, int]:
    """At most CURVE_POINTS averages of consecutive steps, for plotting; and how many steps each covers."""
    every = max(1, math.ceil(losses.numel() / CURVE_POINTS))
    chunks = losses.split(every)
    return [round(float(c.mean()), 5) for c in chunks], every


def run_problem(run: Stage, outcome, verify) -> str | None:
    """Why the judge's run or its fresh-sandbox check cannot be graded, if it cannot."""
    trainer = run.trainer
    if trainer.failure:
        return trainer.failure
    if not trainer.done:
        return (f"the training run stopped after {max(trainer.step, 0)} of {trainer.steps} steps without an error "
                "(did the model's code exit or swallow the judge's questions?)")
    if verify is None or verify.status != "ok":
        why = verify.message if verify is not None else "it was not run"
        return f"the fresh sandbox that checks the training run could not answer: {why}"
    return None


def verification_problems(v, run: Stage, verify) -> None:
    """The fresh sandbox must rebuild the same initial weights, give the same logits at the checked steps, and its
    central differences of the judge's loss must agree with the gradients the training sandbox returned."""
    trainer, out = run.trainer, verify.tensors
    for name, first in trainer.first.items():
        built = out.get("built/" + name)
        if built is None or built.shape != first.shape or not torch.equal(built, first):
            v.problem(f"step 0: the weights the training run started from are not what build_model(config) gives "
                      f"under the same seed in a fresh sandbox (parameter `{name}` differs): is something random "
                      "that the seed does not control (an unseeded generator, time, a Python hash)?")
            return
    extra = [k[len("built/"):] for k in out if k.startswith("built/") and k[len("built/"):] not in trainer.first]
    if extra:
        v.problem(f"step 0: the model built in a fresh sandbox has parameters the trained one lacks (`{extra[0]}`)")
        return
    worst = 0.0
    for step in sorted(trainer.kept):
        kept = trainer.kept[step]
        got, mine = out.get(f"logits{step}"), kept["logits"]
        if got is None or got.shape != mine.shape or nonfinite(got, "", AXES):
            v.problem(f"step {step}: the fresh sandbox returned no usable logits at the judge's weights")
            return
        diff = float((got.double() - mine.double()).abs().max())
        if diff > LOGITS_ATOL * (1 + float(mine.abs().max())):
            v.problem(f"step {step}: the logits the training sandbox returned do not follow from the weights: a fresh "
                      f"sandbox gives logits up to {diff:.3g} different at the same weights on the same batch")
            return
        plus, minus = out.get(f"plus{step}"), out.get(f"minus{step}")
        if plus is None or minus is None or plus.shape != mine.shape or minus.shape != mine.shape:
            v.problem(f"step {step}: the fresh sandbox returned no float64 logits for the finite-difference check")
            return
        targets = trainer.targets(step)
        fd = (mean_ce(plus, targets) - mean_ce(minus, targets)) / (2 * FD_EPS)
        direction = run.directions[step]
        grads = kept["grads"]
        along = sum(float((grads[k].double() * direction[k]).sum()) for k in grads)
        gap = abs(fd - along)
        worst = max(worst, gap / max(abs(fd), abs(along), 1e-12))
        if not math.isfinite(fd) or gap > FD_RTOL * max(abs(fd), abs(along)) + FD_ATOL:
            v.problem(f"step {step}: the gradient the training sandbox returned is not the gradient of the loss: "
                      f"along a direction the judge chose, it gives a slope of {along:.6g}, while the judge's central "
                      f"difference of its own loss (in a fresh sandbox, step {FD_EPS:g} either way) gives {fd:.6g} "
                      "(a .detach() or a gradient hook on the way changes what backward returns; see gradient_path)")
            return
    v.metrics.update(verified_steps=sorted(trainer.kept), gradient_max_rel_error=float(f"{worst:.3g}"))


def verdict(ctx, stages, outcomes):
    """The judge's own loss curve; the fresh sandbox's checks of the run; losses before and after on fixed rows."""
    lim, hp = TRAINING_LIMITS[ctx.track], training_hp(ctx.track, ctx.steps)
    run = run_stage(ctx)
    inputs = run.data
    vocab = train_config(ctx.track)["vocab_size"]
    targets = inputs["check_targets"]
    v = Verdict(ID)
    v.metrics.update(protocol(ctx, run))
    problem = run_problem(run, outcomes[RUN], outcomes.get(VERIFY))
    losses = torch.tensor(run.trainer.losses, dtype=torch.float64)
    if losses.numel():
        v.metrics["loss_curve"], v.metrics["loss_curve_every"] = curve(losses)
        v.metrics["grad_norm_curve"] = curve(torch.tensor(run.trainer.grad_norms, dtype=torch.float64))[0]
    if v.problem(problem):
        return v.result("")
    verification_problems(v, run, outcomes[VERIFY])
    if v.problems:
        return v.result("")
    out = outcomes[VERIFY].tensors
    init, final = out.get("check_first"), out.get("check_last")
    for name, t in (("before training", init), ("after training", final)):
        if v.problem(shape_problem(t, (*targets.shape, vocab), f"the logits on training rows {name}", "(N, T, V)")
                     or nonfinite(t, f"the logits on training rows {name}", AXES)):
            return v.result("")
    final_loss, initial_loss = mean_ce(final, targets), mean_ce(init, targets)
    baseline = unigram_ce(train_targets(ctx.track, inputs), targets, vocab)
    tail = losses[-max(1, losses.numel() // 10):]
    v.metrics.update(final_loss=round(final_loss, 6), initial_loss=round(initial_loss, 6),
                     baseline_loss=round(baseline, 6), loss_ratio=round(final_loss / baseline, 6),
                     reported_final_loss=round(float(tail.mean()), 6))
    learning_problems(v, lim, hp["steps"], initial_loss, final_loss, baseline, tail)
    leak_signals(ctx, v, out, final, targets, final_loss)
    checked = len(run.trainer.kept)
    return v.result(f"{hp['steps']} steps trained by the grader: loss on training rows "
                    f"{initial_loss:.3f} -> {final_loss:.3f} (unigram baseline {baseline:.3f}, ratio "
                    f"{final_loss / baseline:.3f}); {checked} steps re-checked in a fresh sandbox (same initial "
                    "weights, same logits, gradients that agree with finite differences)")


def learning_problems(v, lim, steps, initial_loss, final_loss, baseline, tail) -> None:
    """The run must bring the loss below the line (not start there), and its step losses must end near the loss
    on fixed training rows."""
    if final_loss / baseline > lim["max_loss_ratio"]:
        v.problem(f"the loss did not fall far enough below the baseline: after {steps} steps the loss on training "
                  f"rows is {final_loss:.4f}, the unigram baseline {baseline:.4f} (ratio {final_loss / baseline:.3f}, "
                  f"at most {lim['max_loss_ratio']} passes)")
    if initial_loss / baseline <= lim["max_loss_ratio"]:
        v.problem(f"the loss was already {initial_loss:.4f} before the first step (ratio {initial_loss / baseline:.3f} "
                  "to the unigram baseline): the run did not bring it down, the model arrived knowing the answer "
                  "(computed or hard-coded rather than learned)")
    gap = abs(float(tail.mean()) - final_loss)
    if math.isfinite(gap) and gap > lim["curve_gap_abs"] + lim["curve_gap_rel"] * final_loss:
        v.problem(f"the training steps' losses end at {float(tail.mean()):.4f} (mean of the last {tail.numel()} "
                  f"steps, train mode) but the trained model's loss on fixed training rows is {final_loss:.4f} "
                  "(eval mode): the model behaves differently in train and eval mode")


def leak_signals(ctx, v, out, final, targets, final_loss) -> None:
    """A loss no causal model can reach: Track B below the generator's entropy, Track A far better teacher-forced
    than when the decoder has to read its own predictions."""
    lim = TRAINING_LIMITS[ctx.track]
    if ctx.track == "lm":
        oracle = shipped_corpus().oracle.get("train")
        if oracle:
            v.metrics.update(oracle_loss=oracle, floor_ratio=round(final_loss / oracle, 6))
            if final_loss < lim["min_floor_ratio"] * oracle:
                where = ctx.about(lambda c: (
                    "causality passed on the untrained model, so look for a path to later characters that appears "
                    "only in training, and at the input/target shift" if c.failed("causality") is False
                    else "check the causal mask and the input/target shift"))
                v.problem(f"the training loss {final_loss:.4f} nats/char is suspiciously low: the text's own "
                          f"generator has {oracle:.4f} nats/char of entropy, which no causal model can beat, so the "
                          f"model must be reading the character it predicts ({where})")
        return
    real = targets != PAD
    right = (final.argmax(-1) == targets) | ~real  # (N, T)
    tf_exact = float(right.all(dim=1).double().mean())
    greedy = out.get("check_greedy")
    if greedy is None or tuple(greedy.shape) != tuple(targets.shape):
        v.problem("greedy decoding of the training rows was not returned with shape (N, T)")
        return
    greedy_exact = float(exact_matches(greedy, targets).double().mean())
    token_acc = float(((final.argmax(-1) == targets) & real).sum() / real.sum())
    v.metrics.update(train_token_accuracy=round(token_acc, 6), train_exact_teacher_forced=round(tf_exact, 6),
                     train_exact_greedy=round(greedy_exact, 6))
    if tf_exact - greedy_exact > lim["max_exact_gap"]:
        v.problem(f"the training loss {final_loss:.4f} is suspiciously low for what the model can do without seeing "
                  f"the answer: teacher-forced, {tf_exact:.0%} of training rows are exactly right, but decoding "
                  f"greedily from BOS only {greedy_exact:.0%}; {ctx.about(gap_cause)}")


def gap_cause(ctx) -> str:
    """Why teacher forcing beats greedy decoding from BOS (which uses the model's cache), naming only the checks of
    this grading that did not pass: a causal leak (causality), or cached decoding (kv_cache)."""
    causal, cache = ctx.failed("causality"), ctx.failed("kv_cache")
    if causal is False and cache is False:
        return ("causality and kv_cache passed, so look at what differs between teacher forcing and decoding from "
                "BOS: the BOS/EOS shift, or a path that appears only in training")
    causes = []
    if causal is not False:  # failed, or not graded here
        causes.append("the decoder reads the token it must predict (check the causal mask and the BOS/EOS shift"
                      + ("; see causality)" if causal else ")"))
    if cache:
        causes.append("greedy decoding uses your cache, and cached decoding differs from the full prefix "
                      "(see kv_cache)")
    elif cache is None and causes:  # kv_cache not decided here: the cache stays a suspect beside the mask
        causes.append("greedy decoding uses your cache, which may differ from the full prefix")
    return ", or ".join(causes) or ("causality passed, so look at cached decoding (greedy decoding uses your "
                                    "cache) and the BOS/EOS shift")


def protocol(ctx, run) -> dict:
    """What reproduces the run: seed, steps, configuration, optimizer, data and torch version (wall-clock time is in
    the report's timings, so two gradings of one file give identical results)."""
    hp = training_hp(ctx.track, ctx.steps)
    data = ({"corpus": shipped_corpus().name, "corpus_sha256": shipped_corpus().sha256, "split": "contiguous 80/10/10",
             "vocab": "characters of the training split", "context": hp["context"]} if ctx.track == "lm" else
            {"train_rows": hp["train_rows"], "lengths": [hp["min_len"], hp["max_len"]]})
    # The grading's seed is not among them: it stays with the judge (held-out data is drawn from it).
    return {"steps": hp["steps"], "config": train_config(ctx.track),
            "optimizer": {"name": "AdamW", "lr": hp["lr"], "betas": hp["betas"], "weight_decay": hp["weight_decay"],
                          "clip_grad_norm": hp["clip"], "batch_size": hp["batch_size"], "run_by": "the judge"},
            "data": data, "torch": torch.__version__,
            "parameters": sum(t.numel() for t in run.trainer.first.values()) if run.trainer.first else None}
