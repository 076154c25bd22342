"""The sandbox takes each training step ahead of the judge; the judge's numbers never depend on that guess.

Run for real in the sandbox: the reference takes every step itself (its step gives the judge's weights bit for bit),
and a submission that breaks the sandbox's copy of the optimizer gets the judge's weights sent every step instead,
with exactly the reference's losses. The judge's half of the conversation is also driven directly, to show which
reply each answer gets.
"""
import pytest
import torch

from grader.checks import training
from grader.checks.base import Context
from grader.configs import DEFAULT_SEED
from grader.harness.optimizer import weights_digest
from grader.harness.tensorbytes import encode_tensors
from grader.judge import Options, run_stages
from grader.sandbox import Limits
from grader.source import read_source
from grader.trainer import Trainer
from tests.integrity.integrity_support import BACKENDS, LIMITS, reference, require_backend

pytestmark = pytest.mark.slow
STEPS = {"lm": 30}
_runs: dict = {}

# The harness's AdamW ends with addcdiv_; the reference's forward never calls it, so only the sandbox's own step
# changes: its logits and gradients at the judge's weights stay honest.
BROKEN_STEP = '''
import torch as _torch
_addcdiv = _torch.Tensor.addcdiv_
_torch.Tensor.addcdiv_ = lambda self, a, b, value=1.0: _addcdiv(self, a, b, value=value * 1.5)
'''


def trained(text: str, backend: str) -> Trainer:
    """The judge's trainer after the training run and its fresh-sandbox check of text."""
    require_backend(backend)
    key = (text, backend)
    if key not in _runs:
        stages = training.plan(Context(DEFAULT_SEED, read_source(text.encode()), steps=STEPS))
        options = Options(limits=Limits(**dict(LIMITS, output_mb=64)), backend=backend, steps=STEPS)
        outcomes, _ = run_stages(text, stages, options, None, None)
        assert all(o.status == "ok" for o in outcomes.values()), outcomes
        _runs[key] = stages[0].trainer
    return _runs[key]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_reference_takes_every_step_itself(backend):
    trainer = trained(reference("lm"), backend)
    assert trainer.done and trainer.failure is None
    assert trainer.speculated == STEPS["lm"] and trainer.speculate, "the sandbox's step differed from the judge's"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sandbox_whose_own_step_differs_gets_the_judges_weights_and_the_same_losses(backend):
    honest, broken = trained(reference("lm"), backend), trained(reference("lm") + BROKEN_STEP, backend)
    assert broken.done and broken.failure is None
    # step 0's weights come from the judge; the sandbox's own step 1 differs, so the judge sends its weights from then on
    assert broken.speculated == 1 and not broken.speculate
    assert broken.losses == honest.losses and broken.grad_norms == honest.grad_norms
    assert all(torch.equal(a, b) for a, b in zip(broken.final_weights().values(), honest.final_weights().values()))


class Answers:
    """Drives a Trainer as the sandbox would, recording its replies."""

    def __init__(self, steps: int = 3):
        hp = {"steps": steps, "lr": 0.01, "betas": [0.9, 0.999], "weight_decay": 0.0, "clip": 1.0}
        self.trainer = Trainer("run", hp, lambda step: torch.zeros(1, 2, dtype=torch.long), 4, -100, [0, steps - 1],
                               (1, 2))
        self.replies = []
        self.ask({"kind": "init", "step": -1}, {"w": torch.ones(3)})

    def ask(self, header: dict, tensors: dict) -> None:
        self.trainer.on_ask(dict(header, stage="run"), encode_tensors(tensors),
                            lambda h, blob=b"": self.replies.append(h))

    def grad(self, step: int, weights: str, grads=None) -> None:
        grads = torch.full((3,), 0.5) if grads is None else grads
        self.ask({"kind": "grad", "step": step, "weights": weights},
                 {"logits": torch.zeros(1, 2, 4), "has_grad": torch.ones(1, dtype=torch.uint8), "grads": grads})


def test_an_answer_at_the_judges_weights_is_answered_go_before_it_is_read():
    run = Answers()
    assert run.replies[-1]["kind"] == "step" and run.replies[-1]["speculate"]["clip"] == 1.0
    run.grad(0, weights_digest(run.trainer.flat))
    run.grad(1, weights_digest(run.trainer.flat))
    run.grad(2, weights_digest(run.trainer.flat))
    assert [r["kind"] for r in run.replies[1:]] == ["go", "go", "stop"]
    assert run.trainer.done and run.trainer.speculated == 3


def test_an_answer_at_other_weights_is_not_used_and_the_step_is_redone_at_the_judges():
    run = Answers()
    before = run.trainer.flat.clone()
    run.grad(0, "0" * 32)
    assert run.replies[-1] == {"kind": "step", "step": 0, "speculate": False}
    assert run.trainer.step == 0 and torch.equal(run.trainer.flat, before) and run.trainer.losses == []
    run.grad(0, "anything")  # from now on the judge sends its weights with every reply, and reads the answer first
    assert run.replies[-1] == {"kind": "step", "step": 1} and run.trainer.step == 1


def test_a_bad_answer_after_go_stops_the_run_at_the_next_answer_and_names_its_step():
    run = Answers()
    run.grad(0, weights_digest(run.trainer.flat), grads=torch.tensor([float("nan"), 0.0, 0.0]))
    assert run.replies[-1]["kind"] == "go"  # sent before the answer was read
    assert "not finite at step 0" in run.trainer.failure
    run.grad(1, "whatever")
    assert run.replies[-1] == {"kind": "stop"}
