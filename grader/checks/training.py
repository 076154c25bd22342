"""training: a short seeded CPU run of the grader's loop learns, within its budget, and the same seed replays it.

The loop (AdamW, clipping at 1.0, the judge's batch indices, one thread) runs in the sandbox; the judge
recomputes the losses it grades on from the logits the model returns for fixed training rows, before
and after training, and compares them with a unigram baseline fitted on the training targets.
"""
import math

import torch
import torch.nn.functional as F

from ..compare import nonfinite, shape_problem
from ..configs import ARCH, SPECIAL, TRAIN_MODEL, TRAINING_LIMITS, training_hp
from ..data.reverse import exact_matches, reverse_rows
from ..data.text import random_windows, shipped_corpus, unigram_logprobs
from .base import Stage, Verdict

ID = "training"
NEEDS_TRACK = True
# metrics this check may report (the rubric validates thresholds against them)
METRICS = ("final_loss", "baseline_loss", "loss_ratio", "initial_loss", "reported_final_loss", "replay_max_abs_diff",
           "train_token_accuracy", "train_exact_teacher_forced", "train_exact_greedy", "oracle_loss", "floor_ratio",
           "steps", "parameters", "loss_curve", "grad_norm_curve", "loss_curve_every")
RUN, REPLAY = ID + ".run", ID + ".replay"
CURVE_POINTS = 100
AXES = ("row", "position", "vocab")
PAD = SPECIAL["pad_id"]


def train_config(track: str) -> dict:
    """The contract config the training run builds (Track B's vocabulary comes from the shipped corpus)."""
    config = {"arch": ARCH[track], **TRAIN_MODEL[track]}
    if track == "lm":
        config["vocab_size"] = shipped_corpus().vocab.size
    return config


def train_params(ctx, **extra) -> dict:
    """Probe parameters: track, config, seed and the loop's hyperparameters."""
    hp = training_hp(ctx.track, ctx.steps)
    config = train_config(ctx.track)
    return {"track": ctx.track, "config": config, "seed": ctx.seed % (2 ** 31), "vocab_size": config["vocab_size"],
            "steps": hp["steps"], "lr": hp["lr"], "betas": hp["betas"], "weight_decay": hp["weight_decay"],
            "clip": hp["clip"], **extra}


def train_inputs(ctx) -> dict:
    """The training rows, the batch index of every step, and fixed training rows for the judge's loss."""
    hp = training_hp(ctx.track, ctx.steps)
    batches = hp["steps"], hp["batch_size"]
    if ctx.track == "lm":
        train_ids = shipped_corpus().ids("train")
        rows = random_windows(train_ids, ctx.generator(ID + ".windows"), batches[0] * batches[1], hp["context"])
        check = random_windows(train_ids, ctx.generator(ID + ".check"), hp["check_rows"], hp["context"])
        return {"rows": rows, "targets": rows[:, 1:].contiguous(), "check_rows": check,
                "batches": torch.arange(rows.shape[0]).view(*batches)}
    data = reverse_rows(ctx.generator(ID + ".rows"), hp["train_rows"], TRAIN_MODEL["reverse"]["vocab_size"],
                        hp["min_len"], hp["max_len"])
    n = hp["check_rows"]
    return {**data, "batches": torch.randint(0, hp["train_rows"], batches, generator=ctx.generator(ID + ".batches")),
            **{"check_" + k: data[k][:n].clone() for k in ("src", "src_mask", "tgt_in", "tgt_out")}}


def run_stage(ctx) -> Stage:
    """The training run (one per grading, shared with `evaluation`, which loads the state it returns)."""
    return ctx.stage_once(RUN, lambda: Stage(RUN, "train", train_inputs(ctx), train_params(ctx, return_state=True),
                                             budget_s=training_hp(ctx.track, ctx.steps)["budget_s"]))


def plan(ctx):
    """The run, then a replay of its first steps in a fresh child under the same seed."""
    run = run_stage(ctx)
    steps = training_hp(ctx.track, ctx.steps)["replay_steps"]
    inputs = dict(run.inputs, batches=run.inputs["batches"][:steps].clone())
    # the default stage budget: the replay is a tenth of the run
    replay = Stage(REPLAY, "train", inputs, train_params(ctx, steps=steps))
    return [run, replay]


def check_targets(track: str, inputs: dict) -> torch.Tensor:
    """(N, T) targets of the fixed training rows."""
    return inputs["check_rows"][:, 1:] if track == "lm" else inputs["check_tgt_out"]


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


def verdict(ctx, stages, outcomes):
    """Judge's losses from the returned logits; the reported curve, the replay and the leak signals cross-checked."""
    lim, hp = TRAINING_LIMITS[ctx.track], training_hp(ctx.track, ctx.steps)
    run, inputs = outcomes[RUN], run_stage(ctx).inputs
    config = train_config(ctx.track)
    vocab = config["vocab_size"]
    targets = check_targets(ctx.track, inputs)
    v = Verdict(ID)
    v.metrics.update(protocol(ctx, run))
    losses = run.tensors.get("losses")
    if v.problem(shape_problem(losses, (hp["steps"],), "the per-step training losses", "(steps,)")):
        return v.result("")
    v.metrics["loss_curve"], v.metrics["loss_curve_every"] = curve(losses)
    norms = run.tensors.get("grad_norms")
    if norms is not None and norms.shape == losses.shape:
        v.metrics["grad_norm_curve"] = curve(norms)[0]  # before clipping: how often the clip at 1.0 bites
    init, final = run.tensors.get("init_logits"), run.tensors.get("final_logits")
    for name, t in (("before training", init), ("after training", final)):
        if v.problem(shape_problem(t, (*targets.shape, vocab), f"the logits on training rows {name}", "(N, T, V)")
                     or nonfinite(t, f"the logits on training rows {name}", AXES)):
            return v.result("")
    if not torch.isfinite(losses).all():
        step = int((~torch.isfinite(losses)).nonzero()[0])
        v.problem(f"training diverged: the loss is {float(losses[step])} at step {step}")
    final_loss, initial_loss = mean_ce(final, targets), mean_ce(init, targets)
    baseline = unigram_ce(train_targets(ctx.track, inputs), targets, vocab)
    tail = losses[-max(1, losses.numel() // 10):]
    v.metrics.update(final_loss=round(final_loss, 6), initial_loss=round(initial_loss, 6),
                     baseline_loss=round(baseline, 6), loss_ratio=round(final_loss / baseline, 6),
                     reported_final_loss=round(float(tail.mean()), 6))
    learning_problems(v, lim, hp["steps"], initial_loss, final_loss, baseline, tail)
    leak_signals(ctx, v, run, inputs, final, targets, final_loss)
    replay_problem(v, run, outcomes.get(REPLAY), hp["replay_steps"])
    return v.result(f"{hp['steps']} steps: loss on training rows "
                    f"{initial_loss:.3f} -> {final_loss:.3f} (unigram baseline {baseline:.3f}, ratio "
                    f"{final_loss / baseline:.3f}); the same seed replays the first {hp['replay_steps']} steps "
                    "identically")


def learning_problems(v, lim, steps, initial_loss, final_loss, baseline, tail) -> None:
    """The run must bring the loss below the line (not start there), and its own curve must end near the judge's."""
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
        v.problem(f"the reported loss curve ends at {float(tail.mean()):.4f} (mean of the last {tail.numel()} steps) "
                  f"but the judge recomputes {final_loss:.4f} from the trained model's logits on training rows")


def leak_signals(ctx, v, run, inputs, final, targets, final_loss) -> None:
    """A loss no causal model can reach: Track B below the generator's entropy, Track A far better teacher-forced
    than when the decoder has to read its own predictions."""
    lim = TRAINING_LIMITS[ctx.track]
    if ctx.track == "lm":
        oracle = shipped_corpus().oracle.get("train")
        if oracle:
            v.metrics.update(oracle_loss=oracle, floor_ratio=round(final_loss / oracle, 6))
            if final_loss < lim["min_floor_ratio"] * oracle:
                v.problem(f"the training loss {final_loss:.4f} nats/char is suspiciously low: the text's own "
                          f"generator has {oracle:.4f} nats/char of entropy, which no causal model can beat, so the "
                          "model must be reading the character it predicts (check the causal mask and the "
                          "input/target shift)")
        return
    real = targets != PAD
    right = (final.argmax(-1) == targets) | ~real  # (N, T)
    tf_exact = float(right.all(dim=1).double().mean())
    greedy = run.tensors.get("check_greedy")
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
                  f"greedily from BOS only {greedy_exact:.0%}; the decoder reads the token it must predict (check "
                  "the causal mask and the BOS/EOS shift)")


def replay_problem(v, run, replay, steps: int) -> None:
    """The replay's losses and initial logits must equal the run's, bit for bit."""
    if replay is None or replay.status != "ok":
        v.problem("the replay under the same seed did not finish: " + (replay.message if replay else "not run"))
        return
    got, want = replay.tensors.get("losses"), run.tensors["losses"][:steps]
    if got is None or got.shape != want.shape:
        v.problem(f"the replay returned {None if got is None else tuple(got.shape)} losses, expected ({steps},)")
        return
    diff = (got - want).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    v.metrics["replay_max_abs_diff"] = float(diff.max()) if diff.numel() else 0.0
    init_same = torch.equal(replay.tensors.get("init_logits", torch.empty(0)), run.tensors["init_logits"])
    if diff.max() > 0 or not init_same:
        step = int((diff > 0).nonzero()[0]) if diff.max() > 0 else 0
        v.problem("the same seed gave different numbers: " + (
            f"the replay's loss at step {step} is {float(got[step]):.8g}, the run's {float(want[step]):.8g}"
            if diff.max() > 0 else "the model built under the same seed gives different logits before training")
            + " (is something random that the seed does not control: an unseeded generator, time, or a Python hash?)")


def protocol(ctx, run) -> dict:
    """What reproduces the run: seed, steps, configuration, optimizer, data, torch version and threads (wall-clock
    time is in the report's timings, so two gradings of one file give identical results)."""
    hp = training_hp(ctx.track, ctx.steps)
    data = ({"corpus": shipped_corpus().name, "corpus_sha256": shipped_corpus().sha256, "split": "contiguous 80/10/10",
             "vocab": "characters of the training split", "context": hp["context"]} if ctx.track == "lm" else
            {"train_rows": hp["train_rows"], "lengths": [hp["min_len"], hp["max_len"]]})
    return {"seed": ctx.seed, "steps": hp["steps"], "config": train_config(ctx.track),
            "optimizer": {"name": "AdamW", "lr": hp["lr"], "betas": hp["betas"], "weight_decay": hp["weight_decay"],
                          "clip_grad_norm": hp["clip"], "batch_size": hp["batch_size"]},
            "data": data, "torch": run.facts.get("torch"), "threads": run.facts.get("threads"),
            "parameters": run.facts.get("parameters")}
