"""The fresh sandbox checks the training run while it trains, and what it checks is unchanged.

Run for real in both sandboxes (process and docker). The judge holds the training sandbox's last answer until the
fresh sandbox has been sent its first checked step: a fresh sandbox that ran only after the training would keep it
waiting, and the test fails. A run that the judge stops part way leaves the fresh stages, already running, skipped
with the reason, as they were when they ran after it.
"""
import threading

import pytest

from grader.checks import evaluation, training
from grader.checks.base import Context
from grader.configs import DEFAULT_SEED
from grader.judge import Options, decide, run_stages
from grader.sandbox import Limits
from grader.source import read_source
from tests.integrity.integrity_support import BACKENDS, LIMITS, reference, require_backend

pytestmark = pytest.mark.slow
STEPS = {"lm": 40, "reverse": 40}

# Gradients turn NaN from the 11th backward pass on: the training sandbox's answers diverge part way, while the
# fresh sandbox, which never differentiates, sees an honest model.
DIVERGES = '''
_build_model = build_model
_backwards = [0]


def build_model(config):
    model = _build_model(config)

    def poison(module, args, output):
        logits = output[0] if isinstance(output, tuple) else output
        if logits.requires_grad:
            _backwards[0] += 1
            if _backwards[0] > 10:
                logits.register_hook(lambda grad: grad * float("nan"))
    model.register_forward_hook(poison)
    return model
'''


def grade(text: str, track: str, backend: str, with_evaluation: bool = False):
    """The training run, its checks (and the held-out evaluation) in the two sandboxes: (ctx, stages, outcomes,
    info)."""
    require_backend(backend)
    ctx = Context(DEFAULT_SEED, read_source(text.encode()), steps=STEPS)
    plans = training.plan(ctx) + (evaluation.plan(ctx) if with_evaluation else [])
    stages = list({s.key: s for s in plans}.values())
    return ctx, stages, stages_run(text, stages, backend, STEPS)


def stages_run(text: str, stages, backend: str, steps=None):
    options = Options(limits=Limits(**dict(LIMITS, stage_s=60.0, output_mb=64)), backend=backend, steps=steps or {})
    return run_stages(text, stages, options, None, None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_fresh_sandbox_checks_steps_while_the_run_still_trains(backend):
    require_backend(backend)
    ctx = Context(DEFAULT_SEED, read_source(reference("lm").encode()))  # the full run: the loss must pass too
    run, verify = training.plan(ctx)
    first_sent, made, sent = threading.Event(), verify.feed.tensors, []

    def tensors(step):
        sent.append((step, run.trainer.step, run.trainer.done))  # the step sent, and where the run was then
        out = made(step)
        first_sent.set()
        return out
    verify.feed.tensors = tensors
    held, on_ask = [], run.trainer.on_ask

    def holding(header, blob, reply):
        if header.get("kind") == "grad" and header.get("step") == run.trainer.steps - 1:
            held.append(first_sent.wait(60))  # False: a minute passed and the fresh sandbox had nothing yet
        on_ask(header, blob, reply)
    run.trainer.on_ask = holding

    outcomes, info = stages_run(reference("lm"), [run, verify], backend)
    assert held == [True], "the fresh sandbox got no checked step while the training ran"
    # the covert-channel defence: a checked step goes to the fresh sandbox only once the run has taken it
    # (-1: the final weights, asked for last, once every step is taken)
    assert [step for step, _, _ in sent] == sorted(run.trainer.check_steps) + [-1], sent
    assert all(done if step < 0 else awaited > step for step, awaited, done in sent), f"sent too early: {sent}"
    assert {k: o.status for k, o in outcomes.items()} == {training.RUN: "ok", training.VERIFY: "ok"}
    result = decide(training, ctx, [run, verify], outcomes)
    assert result.status == "pass", result.message
    assert result.metrics["verified_steps"] == sorted(run.trainer.check_steps)
    # the fresh stage waited alongside the run; only its tail came after the first sandbox ended
    timings = info["timings"]
    assert timings["fresh_after_s"] < timings["stages"][training.VERIFY]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_stopped_part_way_leaves_the_fresh_stages_skipped(backend):
    ctx, stages, (outcomes, info) = grade(reference("reverse") + DIVERGES, "reverse", backend, with_evaluation=True)
    run = stages[0]
    assert run.trainer.failure and "not finite at step 10" in run.trainer.failure, run.trainer.failure
    assert info["timings"].get("fresh_sandbox_s") is not None  # the fresh sandbox did run, alongside
    for key in (training.VERIFY, evaluation.HELDOUT):
        assert (outcomes[key].status, outcomes[key].message) == ("skipped",
                                                                 f"needs {training.RUN}, which did not finish")
    plans = {c.ID: [s for s in stages if s.key.split(".")[0] == c.ID or s.key == training.RUN]
             for c in (training, evaluation)}
    trained = decide(training, ctx, plans["training"], outcomes, set(plans))
    assert trained.status == "fail" and "not finite at step 10" in trained.message
    evaluated = decide(evaluation, ctx, plans["evaluation"], outcomes, set(plans))
    assert evaluated.status == "skipped" and "see training" in evaluated.message, evaluated.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_that_never_begins_runs_no_fresh_sandbox(backend):
    refusal = "def build_model(config):\n    raise RuntimeError('no')\n\n\ndef _unused_build_model("
    text = reference("reverse").replace("def build_model(", refusal, 1)
    ctx, stages, (outcomes, info) = grade(text, "reverse", backend, with_evaluation=True)
    assert outcomes[training.RUN].status == "error"
    assert info["timings"].get("fresh_sandbox_s") is None  # nothing to check: its sandbox never got a go
    for key in (training.VERIFY, evaluation.HELDOUT):
        assert outcomes[key].status == "skipped"
