"""The training and evaluation verdicts on outputs made up here (no sandbox): each signal says what it should."""
import torch
import torch.nn.functional as F

from grader.checks import evaluation, training
from grader.checks.base import Context
from grader.configs import DEFAULT_SEED, EVALUATION, SPECIAL, TRAINING
from grader.results import StageOutcome
from grader.source import read_source

from tests.support.grading import REFERENCES

EOS = SPECIAL["eos_id"]


def context(track: str) -> Context:
    return Context(DEFAULT_SEED, read_source(REFERENCES[track].read_bytes()))


def onehot(targets: torch.Tensor, vocab: int, scale: float = 12.0) -> torch.Tensor:
    """Logits that put almost all mass on the targets: (N, T, V)."""
    return F.one_hot(targets, vocab).double() * scale


def falling(steps: int) -> torch.Tensor:
    """A loss curve that falls from 2.5 to about 1e-4 and flattens out."""
    return 2.5 * torch.exp(-torch.linspace(0, 10, steps, dtype=torch.float64))


def ok(key: str, **tensors) -> StageOutcome:
    return StageOutcome(key, "ok", tensors=tensors)


def training_outcomes(ctx, final=None, greedy=None, losses=None):
    """A run the judge took to its last step that learned the training rows perfectly, unless told otherwise; no
    step kept for the gradient check (tested below on its own)."""
    stages = {s.key: s for s in training.plan(ctx)}
    run = stages[training.RUN]
    hp = TRAINING[ctx.track]
    targets = run.data["check_targets"]
    vocab = training.train_config(ctx.track)["vocab_size"]
    trainer = run.trainer
    trainer.first, trainer.kept, trainer.done = {"w": torch.ones(3)}, {}, True
    trainer.losses = (falling(hp["steps"]) if losses is None else losses).tolist()
    trainer.grad_norms = [1.0] * len(trainer.losses)
    verify = ok(training.VERIFY, **{"built/w": torch.ones(3), "check_first": torch.zeros(*targets.shape, vocab),
                                    "check_last": onehot(targets, vocab) if final is None else final})
    if ctx.track == "reverse":
        verify.tensors["check_greedy"] = targets.clone() if greedy is None else greedy
    return stages, {training.RUN: ok(training.RUN), training.VERIFY: verify}


def test_a_run_that_learns_passes_with_the_protocol_recorded():
    ctx = context("reverse")
    result = training.verdict(ctx, *training_outcomes(ctx))
    assert result.status == "pass", result.message
    m = result.metrics
    assert m["loss_ratio"] == round(m["final_loss"] / m["baseline_loss"], 6)
    assert "seed" not in m, "the grading's seed stays with the judge"
    assert m["steps"] == TRAINING["reverse"]["steps"] and m["config"]["arch"] == "seq2seq"
    assert m["optimizer"]["clip_grad_norm"] == 1.0 and m["optimizer"]["run_by"] == "the judge"
    assert isinstance(m["loss_curve"], list) and len(m["loss_curve"]) <= training.CURVE_POINTS
    assert set(k for k in m if k in training.METRICS) >= {"final_loss", "baseline_loss", "loss_ratio"}


def test_initial_weights_the_fresh_sandbox_does_not_rebuild_are_named_as_step_0():
    ctx = context("reverse")
    stages, outcomes = training_outcomes(ctx)
    outcomes[training.VERIFY].tensors["built/w"] = torch.ones(3) * 1.5
    result = training.verdict(ctx, stages, outcomes)
    assert result.status == "fail" and result.message.startswith("step 0:") and "same seed" in result.message


def test_a_run_that_stopped_early_or_failed_names_what_happened():
    ctx = context("reverse")
    stages, outcomes = training_outcomes(ctx)
    stages[training.RUN].trainer.done, stages[training.RUN].trainer.step = False, 12
    result = training.verdict(ctx, stages, outcomes)
    assert result.status == "fail" and "stopped after 12 of" in result.message
    stages[training.RUN].trainer.failure = "training diverged: the logits are not finite at step 42"
    result = training.verdict(ctx, stages, outcomes)
    assert result.status == "fail" and "step 42" in result.message


def gradient_case(scale: float = 1.0, shift: float = 0.0):
    """One checked step of a made-up run: logits, float64 logits either side along a direction whose central
    difference the judge computes, and a returned gradient that agrees with it (times scale)."""
    ctx = context("reverse")
    stages, outcomes = training_outcomes(ctx)
    run = stages[training.RUN]
    trainer = run.trainer
    targets = trainer.targets(7)  # (B, T)
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(*targets.shape, 16, generator=gen)
    delta = torch.randn(*targets.shape, 16, generator=gen, dtype=torch.float64)
    eps = training.FD_EPS
    plus, minus = logits.double() + eps * delta, logits.double() - eps * delta
    fd = (training.mean_ce(plus, targets) - training.mean_ce(minus, targets)) / (2 * eps)
    d = torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64)
    trainer.kept = {7: {"weights": {"w": torch.ones(3)}, "logits": logits,
                        "grads": {"w": (scale * fd * d).float()}}}
    run.directions = {7: {"w": d}}
    outcomes[training.VERIFY].tensors.update({"logits7": logits + shift, "plus7": plus, "minus7": minus})
    return ctx, stages, outcomes


def test_a_gradient_that_agrees_with_the_judges_finite_difference_passes():
    result = training.verdict(*gradient_case())
    assert result.status == "pass", result.message
    assert result.metrics["verified_steps"] == [7] and result.metrics["gradient_max_rel_error"] < 1e-3


def test_a_forged_gradient_names_the_step_and_both_slopes():
    result = training.verdict(*gradient_case(scale=3.0))
    assert result.status == "fail" and result.message.startswith("step 7:"), result.message
    assert "is not the gradient of the loss" in result.message and "central difference" in result.message


def test_logits_a_fresh_sandbox_does_not_reproduce_are_named():
    result = training.verdict(*gradient_case(shift=0.01))
    assert result.status == "fail" and result.message.startswith("step 7:")
    assert "do not follow from the weights" in result.message


def test_track_a_leak_signal_teacher_forced_perfect_greedy_wrong():
    ctx = context("reverse")
    targets = training.run_stage(ctx).data["check_targets"]
    greedy = torch.full_like(targets, EOS)  # greedy decoding stops at once
    result = training.verdict(ctx, *training_outcomes(ctx, greedy=greedy))
    assert result.status == "fail" and "suspiciously low" in result.message and "greedily" in result.message
    assert result.metrics["train_exact_teacher_forced"] == 1.0 and result.metrics["train_exact_greedy"] == 0.0


def test_track_b_loss_below_the_generators_entropy_is_a_leak():
    ctx = context("lm")
    result = training.verdict(ctx, *training_outcomes(ctx))
    assert result.status == "fail" and "suspiciously low" in result.message and "entropy" in result.message
    assert result.metrics["floor_ratio"] < 0.1


def test_no_learning_fails_against_the_baseline():
    ctx = context("reverse")
    targets = training.run_stage(ctx).data["check_targets"]
    uniform = torch.zeros(*targets.shape, 16, dtype=torch.float64)
    losses = torch.full((TRAINING["reverse"]["steps"],), 2.77, dtype=torch.float64)
    result = training.verdict(ctx, *training_outcomes(ctx, final=uniform, losses=losses))
    assert result.status == "fail" and "did not fall far enough below the baseline" in result.message


def test_step_losses_far_from_the_trained_models_loss_are_reported():
    ctx = context("reverse")
    losses = torch.full((TRAINING["reverse"]["steps"],), 0.9, dtype=torch.float64)
    result = training.verdict(ctx, *training_outcomes(ctx, losses=losses))
    assert result.status == "fail" and "behaves differently in train and eval mode" in result.message


def reverse_eval(trained_greedy_ok=True, untrained_perfect=False):
    """Evaluation outcomes for Track A from made-up logits."""
    ctx = context("reverse")
    stages = {s.key: s for s in evaluation.plan(ctx)}
    tgt = stages[evaluation.HELDOUT].kept["tgt_out"]
    perfect, wrong = onehot(tgt, 16), onehot(torch.full_like(tgt, EOS), 16)
    tensors = {}
    for who, good_tf, good_greedy in (("trained", True, trained_greedy_ok),
                                       ("untrained", untrained_perfect, untrained_perfect)):
        tensors[f"{who}/tf_logits"] = perfect if good_tf else wrong
        tensors[f"{who}/greedy_logits"] = perfect if good_greedy else wrong
        tensors[f"{who}/greedy"] = tensors[f"{who}/greedy_logits"].argmax(-1)
    tensors.update(causality_cases(stages[evaluation.HELDOUT]))
    return ctx, stages, {evaluation.HELDOUT: ok(evaluation.HELDOUT, **tensors)}


def causality_cases(stage, leak_at=None) -> dict:
    """Logits for the causality cases on the evaluation inputs: unchanged before each change (a causal model),
    unless leak_at names a case whose earlier logits move."""
    out = {}
    for name, (pos, real) in stage.where.items():
        base = torch.zeros(*real.shape, 16)
        changed = base.clone()
        for row, p in enumerate(pos.tolist()):
            changed[row, p:] += 1.0  # the changed position and later ones move
        if name == leak_at:
            changed[0, 0] += 1.0
        out.update({f"cause/{name}": base, f"cause/{name}_changed": changed})
    return out


def test_a_change_of_a_later_token_that_moves_earlier_logits_is_a_leak():
    ctx, stages, outcomes = reverse_eval()
    outcomes[evaluation.HELDOUT].tensors.update(causality_cases(stages[evaluation.HELDOUT], leak_at="padded"))
    result = evaluation.verdict(ctx, stages, outcomes)
    assert result.status == "fail" and "earlier position 0" in result.message and "see causality" in result.message


def test_track_a_evaluation_passes_and_counts_duplicates():
    ctx, stages, outcomes = reverse_eval()
    result = evaluation.verdict(ctx, stages, outcomes)
    assert result.status == "pass", result.message
    m = result.metrics
    assert m["token_accuracy"] == 1.0 and m["exact_match"] == 1.0 and m["untrained_exact_match"] == 0.0
    assert m["heldout_rows"] == EVALUATION["reverse"]["heldout_rows"] and m["heldout_duplicates"] > 0, \
        "lengths 3 to 8 over 13 tokens: independent draws repeat some short rows"


def test_an_untrained_model_that_already_solves_the_task_fails():
    result = evaluation.verdict(*reverse_eval(untrained_perfect=True))
    assert result.status == "fail" and "untrained model already solves" in result.message
    assert "hard-coded" in result.message


def test_track_a_teacher_forced_but_not_greedy_is_called_a_leak():
    result = evaluation.verdict(*reverse_eval(trained_greedy_ok=False))
    assert result.status == "fail" and "causal leak" in result.message
    assert result.metrics["teacher_forced_exact"] == 1.0 and result.metrics["exact_match"] == 0.0


def test_track_b_perfect_held_out_predictions_are_below_the_floor():
    ctx = context("lm")
    stages = {s.key: s for s in evaluation.plan(ctx)}
    held = stages[evaluation.HELDOUT].kept
    vocab = training.train_config("lm")["vocab_size"]
    tensors = {f"{who}/{split}_logits": onehot(held[f"{split}_rows"][:, 1:], vocab)
               for who in ("trained", "untrained") for split in ("test", "validation")}
    tensors["untrained/test_logits"] = torch.zeros_like(tensors["untrained/test_logits"])
    tensors.update(causality_cases(stages[evaluation.HELDOUT]))
    stages[evaluation.CYCLIC_RUN].trainer.done = True
    outcomes = {evaluation.HELDOUT: ok(evaluation.HELDOUT, **tensors), evaluation.CYCLIC: ok(evaluation.CYCLIC),
                evaluation.CYCLIC_RUN: ok(evaluation.CYCLIC_RUN), evaluation.CYCLIC_VERIFY: ok(evaluation.CYCLIC_VERIFY)}
    result = evaluation.verdict(ctx, stages, outcomes)
    assert result.status == "fail" and "below what any causal model can reach" in result.message


def test_the_judges_adamw_and_clip_take_torchs_steps():
    """grader/harness/optimizer.py writes AdamW and the clip out on one flat tensor; torch's AdamW and clip_grad_norm_
    on the same gradients land on the same weights (a parameter without a gradient at a step is skipped by both)."""
    from grader.harness.optimizer import AdamW, clip_norm
    gen = torch.Generator().manual_seed(0)
    shapes = [(4, 3), (5,), (2, 2, 2)]
    params = [torch.randn(s, generator=gen).requires_grad_(True) for s in shapes]
    flat = torch.cat([p.detach().reshape(-1) for p in params]).clone()
    ours = AdamW([p.numel() for p in params], 3e-3, (0.9, 0.999), 0.01)
    theirs = torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.999), weight_decay=0.01)
    for step in range(6):
        grads = [torch.randn(s, generator=gen) * 3 for s in shapes]
        present = [True, step % 3 != 1, True]
        for p, g, has in zip(params, grads, present):
            p.grad = g.clone() if has else None
        torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], 1.0)
        theirs.step()
        grad = torch.cat([(g if has else torch.zeros_like(g)).reshape(-1) for g, has in zip(grads, present)])
        clip_norm(grad, 1.0)
        ours.step(flat, grad, present)
    torch.testing.assert_close(flat, torch.cat([p.detach().reshape(-1) for p in params]), rtol=1e-6, atol=1e-7)
