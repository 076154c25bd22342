"""Grades the student's process cannot forge: training and evaluation are decided from what the judge computes.

Each attack is a reference with a few lines appended that try one trick from inside the sandbox; it runs for
real on both backends, with a short step budget (every trick shows at any length), and must earn nothing on
the check it attacks. The old design (the sandbox trained and reported) passed every one of them.
"""
import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits
from .integrity_support import BACKENDS, LIMITS, reference, require_backend

pytestmark = pytest.mark.slow
STEPS = {"reverse": 60, "lm": 40}
_cache: dict = {}

FORGED_RESULT = '''
import os as _os, sys as _sys
_build = build_model


def build_model(config):
    """Walk the stack to the harness's pipe, report success with no training at all, and leave."""
    model = _build(config)
    frame = _sys._getframe()
    while frame is not None:
        if "send" in frame.f_locals and "write_fd" in frame.f_locals:
            frame.f_locals["send"]({"type": "result", "outcome": "ok"})  # well-formed: facts are refused elsewhere
            _os._exit(0)
        frame = frame.f_back
    return model
'''

SCALED_GRADIENT = '''
_build = build_model


def build_model(config):
    """Every gradient three times its size (Adam hardly notices; the judge's finite difference does)."""
    model = _build(config)
    for p in model.parameters():
        p.register_hook(lambda g: g * 3.0)
    return model
'''

RANDOM_GRADIENT = '''
_build = build_model


def build_model(config):
    """Gradients replaced by noise of the same size."""
    model = _build(config)
    for p in model.parameters():
        p.register_hook(lambda g: torch.randn_like(g) * (g.norm() / g.numel() ** 0.5))
    return model
'''

CALL_COUNTER = '''
_build = build_model


def build_model(config):
    """Logits that depend on how often the model was called, not only on the weights (a shift that leaves the
    loss unchanged, so only the fresh sandbox's recomputation can tell)."""
    model = _build(config)
    inner, calls = model.forward, [0]

    def forward(*args, **kwargs):
        calls[0] += 1
        out = inner(*args, **kwargs)
        if isinstance(out, tuple):
            return (out[0] + 0.01 * calls[0],) + tuple(out[1:])
        return out + 0.01 * calls[0]
    model.forward = forward
    return model
'''

# Held-out targets looked up on the stack: perfect answers if any frame holds them, constant logits otherwise.
STACK_TARGETS_REVERSE = '''
import sys as _sys
_build = build_model


def _targets_for(src):
    frame = _sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, dict) and "tgt_out" in value and "src" in value and value["src"].shape == src.shape \\
                    and bool((value["src"] == src).all()):
                return value["tgt_out"]
        frame = frame.f_back
    return None


def build_model(config):
    model = _build(config)
    inner, vocab = model.forward, int(config["vocab_size"])

    def forward(src, tgt, src_mask):
        out = inner(src, tgt, src_mask)
        if model.training:
            return out
        found = _targets_for(src)
        if found is None:
            return torch.zeros_like(out)
        return 50.0 * torch.nn.functional.one_hot(found[:, :out.shape[1]], vocab).to(out.dtype)
    model.forward = forward
    return model
'''

STACK_TARGETS_LM = '''
import sys as _sys
_build = build_model


def _next_tokens(ids):
    frame = _sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if not isinstance(value, dict):
                continue
            for key, rows in list(value.items()):
                if isinstance(key, str) and key.endswith("_rows") and hasattr(rows, "shape") and rows.dim() == 2 \\
                        and rows.shape[0] == ids.shape[0] and rows.shape[1] == ids.shape[1] + 1 \\
                        and bool((rows[:, :-1] == ids).all()):
                    return rows[:, 1:]
        frame = frame.f_back
    return None


def build_model(config):
    model = _build(config)
    inner, vocab = model.forward, int(config["vocab_size"])

    def forward(ids, mask=None, cache=None):
        logits, cache = inner(ids, mask=mask, cache=cache)
        if model.training or ids.shape[0] < 64 or ids.shape[1] < 16:  # only whole held-out batches: keep it quick
            return logits, cache
        found = _next_tokens(ids)
        if found is None:
            return torch.zeros_like(logits), cache
        return 50.0 * torch.nn.functional.one_hot(found, vocab).to(logits.dtype), cache
    model.forward = forward
    return model
'''


def graded(track: str, attack: str, backend: str) -> dict:
    """The report of the track's reference with the attack appended, training and evaluation only."""
    require_backend(backend)
    key = (track, attack, backend)
    if key not in _cache:
        # room for the fresh sandbox's float64 logits (the corpus' 16 MiB is for the correctness checks)
        limits = Limits(**dict(LIMITS, output_mb=64))
        options = Options(only=("training", "evaluation"), limits=limits, backend=backend, steps=STEPS)
        _cache[key] = grade_bytes((reference(track) + attack).encode(), "submission.py", options)
    return _cache[key]


def check(report: dict, check_id: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == check_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forged_result_frame_earns_no_training_and_no_evaluation(backend):
    report = graded("reverse", FORGED_RESULT, backend)
    training, evaluation = check(report, "training"), check(report, "evaluation")
    assert training["status"] == "fail" and "stopped after 0 of 60 steps" in training["message"], training
    assert evaluation["status"] == "skipped" and "training" in evaluation["message"], evaluation


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attack", [SCALED_GRADIENT, RANDOM_GRADIENT], ids=["scaled", "random"])
def test_a_forged_gradient_is_caught_by_the_judges_finite_difference(backend, attack):
    training = check(graded("reverse", attack, backend), "training")
    assert training["status"] == "fail", training
    assert "is not the gradient of the loss" in training["message"] and "central difference" in training["message"], \
        training["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_logits_that_do_not_follow_from_the_weights_are_caught_in_a_fresh_sandbox(backend):
    training = check(graded("reverse", CALL_COUNTER, backend), "training")
    assert training["status"] == "fail", training
    assert "do not follow from the weights" in training["message"], training["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_out_targets_are_nowhere_on_the_stack_track_a(backend):
    evaluation = check(graded("reverse", STACK_TARGETS_REVERSE, backend), "evaluation")
    # The attack patches forward, so it moves the teacher-forced accuracy (greedy decoding goes through decode):
    # found targets give 1.0 (the control below), constant logits give about 0.
    assert evaluation["status"] == "fail", evaluation
    metrics = evaluation["metrics"]
    assert metrics["token_accuracy"] < 0.5 and metrics["untrained_token_accuracy"] < 0.5, metrics


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_out_targets_are_nowhere_on_the_stack_track_b(backend):
    evaluation = check(graded("lm", STACK_TARGETS_LM, backend), "evaluation")
    assert evaluation["status"] == "fail", evaluation
    # one-hot answers found on the stack would give a held-out loss near 0 (below the generator's entropy)
    assert evaluation["metrics"]["heldout_loss"] > 1.0, evaluation["metrics"]


@pytest.fixture
def targets_sent(monkeypatch):
    """The design these tests guard against: the held-out stage sends its targets along with its inputs."""
    from grader.checks import evaluation
    honest = evaluation.heldout_data

    def leaky(ctx):
        inputs, kept, extra = honest(ctx)
        return {**inputs, **kept}, kept, extra
    monkeypatch.setattr(evaluation, "heldout_data", leaky)


def test_the_stack_attacks_answer_perfectly_when_the_targets_are_sent(targets_sent):
    """The control: with the targets in the sandbox's inputs, both attacks find them and answer exactly."""
    options = Options(only=("training", "evaluation"), limits=Limits(**dict(LIMITS, output_mb=64)), backend="process",
                      steps=STEPS)
    require_backend("process")
    reverse = check(grade_bytes((reference("reverse") + STACK_TARGETS_REVERSE).encode(), "submission.py", options),
                    "evaluation")["metrics"]
    assert reverse["token_accuracy"] == 1.0 and reverse["untrained_token_accuracy"] == 1.0, reverse
    lm = check(grade_bytes((reference("lm") + STACK_TARGETS_LM).encode(), "submission.py", options),
               "evaluation")["metrics"]
    assert lm["heldout_loss"] < 0.01, lm


def test_the_fresh_sandbox_gets_held_out_inputs_but_never_their_targets():
    """What the evaluation stages send: inputs only; the targets stay in the judge's copy."""
    from grader.checks import evaluation
    from grader.checks.base import Context
    from grader.source import read_source
    for track in ("reverse", "lm"):
        ctx = Context(20261129, read_source(reference(track).encode()))
        stages = {s.key: s for s in evaluation.plan(ctx)}
        held = stages[evaluation.HELDOUT]
        sent = held.sent
        assert not {"tgt_out", "test_rows", "validation_rows", "targets", "expected"} & set(sent), sorted(sent)
        kept = held.kept
        if track == "reverse":
            assert "tgt_out" in kept
        else:
            assert {"test_rows", "validation_rows"} <= set(kept)
            for split in ("test", "validation"):  # the sandbox's inputs stop one token short of the targets' last
                assert sent[f"{split}_inputs"].shape[1] == kept[f"{split}_rows"].shape[1] - 1
            assert set(stages[evaluation.CYCLIC].inputs) == {"prompt"}  # the continuations stay in the judge


def test_a_report_of_two_sandboxes_lists_the_layers_both_had_and_is_weak_if_either_was():
    from grader.judge import merge_runs
    strong = {"sandbox": {"backend": "process", "layers": ["uid", "seccomp", "cgroup"], "weak": False},
              "timings": {"stages": {"training.run": 1.0}}}
    weak = {"sandbox": {"backend": "process", "layers": ["uid", "seccomp"], "weak": True, "missing": ["cgroup: off"]},
            "timings": {"stages": {"training.verify": 0.5}, "sandbox_s": 2.0}}
    merged = merge_runs(strong, weak)
    assert merged["sandbox"]["layers"] == ["uid", "seccomp"] and merged["sandbox"]["weak"] is True
    assert merged["sandbox"]["missing"] == ["cgroup: off"]
    assert merged["timings"]["stages"] == {"training.run": 1.0, "training.verify": 0.5}
    assert merge_runs(strong, strong)["sandbox"] == strong["sandbox"]
