"""The training and evaluation verdicts on outputs made up here (no sandbox): each signal says what it should."""
import torch
import torch.nn.functional as F

from grader.checks import evaluation, training
from grader.checks.base import Context
from grader.configs import DEFAULT_SEED, EVALUATION, SPECIAL, TRAINING
from grader.results import StageOutcome
from grader.source import read_source

from conftest import REFERENCES

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
    return StageOutcome(key, "ok", tensors=tensors, facts={"train_s": 1.0, "threads": 1, "torch": torch.__version__})


def training_outcomes(ctx, final=None, greedy=None, losses=None, replay_losses=None):
    """A run that learned the training rows perfectly, and its faithful replay, unless told otherwise."""
    stages = {s.key: s for s in training.plan(ctx)}
    stages[training.RUN] = training.run_stage(ctx)  # planned once per grading, whichever check claimed it
    inputs, hp = stages[training.RUN].inputs, TRAINING[ctx.track]
    targets = training.check_targets(ctx.track, inputs)
    vocab = training.train_config(ctx.track)["vocab_size"]
    init = torch.zeros(*targets.shape, vocab, dtype=torch.float64)
    losses = falling(hp["steps"]) if losses is None else losses
    run = ok(training.RUN, losses=losses, grad_norms=torch.ones_like(losses), init_logits=init,
             final_logits=onehot(targets, vocab) if final is None else final)
    if ctx.track == "reverse":
        run.tensors["check_greedy"] = targets.clone() if greedy is None else greedy
    k = hp["replay_steps"]
    replay_losses = losses[:k].clone() if replay_losses is None else replay_losses
    replay = ok(training.REPLAY, losses=replay_losses, init_logits=init)
    return stages, {training.RUN: run, training.REPLAY: replay}


def test_a_run_that_learns_and_replays_passes_with_the_protocol_recorded():
    ctx = context("reverse")
    stages, outcomes = training_outcomes(ctx)
    result = training.verdict(ctx, stages, outcomes)
    assert result.status == "pass", result.message
    m = result.metrics
    assert m["loss_ratio"] == round(m["final_loss"] / m["baseline_loss"], 6) and m["replay_max_abs_diff"] == 0
    assert m["seed"] == DEFAULT_SEED and m["steps"] == TRAINING["reverse"]["steps"] and m["config"]["arch"] == "seq2seq"
    assert m["threads"] == 1 and m["optimizer"]["clip_grad_norm"] == 1.0
    assert isinstance(m["loss_curve"], list) and len(m["loss_curve"]) <= training.CURVE_POINTS
    assert set(k for k in m if k in training.METRICS) >= {"final_loss", "baseline_loss", "loss_ratio"}


def test_a_replay_that_differs_names_the_first_step():
    ctx = context("reverse")
    k = TRAINING["reverse"]["replay_steps"]
    replay = falling(TRAINING["reverse"]["steps"])[:k].clone()
    replay[5] += 1e-7
    result = training.verdict(ctx, *training_outcomes(ctx, replay_losses=replay))
    assert result.status == "fail" and "same seed gave different numbers" in result.message
    assert "step 5" in result.message


def test_track_a_leak_signal_teacher_forced_perfect_greedy_wrong():
    ctx = context("reverse")
    targets = training.run_stage(ctx).inputs["check_tgt_out"]
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
    targets = training.run_stage(ctx).inputs["check_tgt_out"]
    uniform = torch.zeros(*targets.shape, 16, dtype=torch.float64)
    losses = torch.full((TRAINING["reverse"]["steps"],), 2.77, dtype=torch.float64)
    result = training.verdict(ctx, *training_outcomes(ctx, final=uniform, losses=losses))
    assert result.status == "fail" and "did not fall far enough below the baseline" in result.message


def test_a_loss_curve_that_disagrees_with_the_judge_is_reported():
    ctx = context("reverse")
    losses = torch.full((TRAINING["reverse"]["steps"],), 0.9, dtype=torch.float64)
    result = training.verdict(ctx, *training_outcomes(ctx, losses=losses))
    assert result.status == "fail" and "reported loss curve" in result.message


def test_divergence_names_the_step():
    ctx = context("reverse")
    losses = falling(TRAINING["reverse"]["steps"])
    losses[42:] = float("nan")
    result = training.verdict(ctx, *training_outcomes(ctx, losses=losses))
    assert result.status == "fail" and "diverged" in result.message and "step 42" in result.message


def reverse_eval(trained_greedy_ok=True, untrained_perfect=False):
    """Evaluation outcomes for Track A from made-up logits."""
    ctx = context("reverse")
    stages = {s.key: s for s in evaluation.plan(ctx)}
    tgt = stages[evaluation.HELDOUT].inputs["tgt_out"]
    perfect, wrong = onehot(tgt, 16), onehot(torch.full_like(tgt, EOS), 16)
    tensors = {}
    for who, good_tf, good_greedy in (("trained", True, trained_greedy_ok),
                                       ("untrained", untrained_perfect, untrained_perfect)):
        tensors[f"{who}/tf_logits"] = perfect if good_tf else wrong
        tensors[f"{who}/greedy_logits"] = perfect if good_greedy else wrong
        tensors[f"{who}/greedy"] = tensors[f"{who}/greedy_logits"].argmax(-1)
    return ctx, stages, {evaluation.HELDOUT: ok(evaluation.HELDOUT, **tensors)}


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
    held = stages[evaluation.HELDOUT].inputs
    vocab = training.train_config("lm")["vocab_size"]
    tensors = {f"{who}/{split}_logits": onehot(held[f"{split}_rows"][:, 1:], vocab)
               for who in ("trained", "untrained") for split in ("test", "validation")}
    tensors["untrained/test_logits"] = torch.zeros_like(tensors["untrained/test_logits"])
    result = evaluation.verdict(ctx, stages, {evaluation.HELDOUT: ok(evaluation.HELDOUT, **tensors),
                                              evaluation.CYCLIC: ok(evaluation.CYCLIC)})
    assert result.status == "fail" and "below what any causal model can reach" in result.message
