"""The fresh sandbox's questions while the judge trains: a step is sent only once the run has taken it, anything out
of turn gets stop, and which steps are checked is drawn step by step, so the past tells nothing about the future.

The judge's half is driven directly here (a Trainer fed answers as the training sandbox would send them);
tests/training/test_alongside.py runs the two sandboxes for real.
"""
import statistics
import threading
import types

import torch

from grader.feed import Feed
from grader.harness.tensorbytes import encode_tensors
from grader.trainer import Trainer, direction_generator, verification_steps

WAIT_S = 0.3  # how long a question must stay unanswered to count as waiting


def trainer(steps: int = 4, checked=(0, 2, 3)) -> Trainer:
    """A judge's run of `steps` steps on a 3-number model, its initial weights already in."""
    hp = {"steps": steps, "lr": 0.01, "betas": [0.9, 0.999], "weight_decay": 0.0, "clip": 1.0}
    run = Trainer("run", hp, lambda step: torch.zeros(1, 2, dtype=torch.long), 4, -100, list(checked), (1, 2))
    run.on_ask({"kind": "init", "step": -1, "stage": "run"}, encode_tensors({"w": torch.ones(3)}), lambda *a: None)
    return run


def answer(run: Trainer, step: int, grads=None) -> None:
    """The training sandbox's answer for step (at the judge's weights: the judge reads it after its own reply)."""
    grads = torch.full((3,), 0.5) if grads is None else grads
    tensors = {"logits": torch.zeros(1, 2, 4), "grads": grads, "has_grad": torch.ones(1, dtype=torch.uint8)}
    header = {"kind": "grad", "step": step, "stage": "run", "weights": run.expected}
    run.on_ask(header, encode_tensors(tensors), lambda *a: None)


class Asker:
    """The fresh stage's side: each question asked in a thread of its own, its reply recorded."""

    def __init__(self, run: Trainer, order):
        self.sent = []  # (step, the run's step when the tensors were made)
        self.feed = Feed(types.SimpleNamespace(trainer=run, key="run"), self.tensors, order)
        self.replies = []

    def tensors(self, step: int) -> dict:
        self.sent.append((step, self.feed.run.trainer.step))
        return {"x": torch.zeros(1)}

    def ask(self, step: int, kind: str = "need") -> threading.Thread:
        thread = threading.Thread(target=self.feed.on_ask, daemon=True, args=(
            {"kind": kind, "step": step, "stage": "v"}, b"", lambda h, blob=b"": self.replies.append(h)))
        thread.start()
        return thread


def test_a_checked_step_is_sent_only_once_the_run_has_taken_it():
    run = trainer()
    fresh = Asker(run, [0, 2, 3, -1])
    waiting = fresh.ask(0)
    waiting.join(WAIT_S)
    assert waiting.is_alive() and fresh.replies == [], "step 0 was sent before the training sandbox answered it"
    answer(run, 0)
    waiting.join(10)
    assert fresh.replies == [{"kind": "tensors", "step": 0}] and fresh.sent == [(0, 1)]
    waiting = fresh.ask(2)
    answer(run, 1)
    waiting.join(WAIT_S)
    assert waiting.is_alive(), "step 2 was sent after step 1's answer, before step 2's"
    answer(run, 2)
    waiting.join(10)
    waiting = fresh.ask(3)  # the last step: only once the run is over
    waiting.join(WAIT_S)
    assert waiting.is_alive()
    answer(run, 3)
    waiting.join(10)
    fresh.ask(-1).join(10)  # the final weights
    assert run.done and [h["kind"] for h in fresh.replies] == ["tensors"] * 4
    assert fresh.sent == [(0, 1), (2, 3), (3, 4), (-1, 4)]


def test_a_question_out_of_turn_gets_stop_and_nothing_after():
    run = trainer()
    for step in (1, 0):  # not a checked step; then a checked one, but the stage has lost its turn
        asked = Asker(run, [0, 2, 3, -1]) if step == 1 else asked
        asked.ask(step).join(10)
    assert asked.replies == [{"kind": "stop"}, {"kind": "stop"}] and asked.sent == []
    other = Asker(run, [0, 2, 3, -1])
    other.ask(0, kind="grad").join(10)  # a question of the wrong kind
    assert other.replies == [{"kind": "stop"}]


def test_a_run_that_ends_short_or_fails_stops_the_waiting_stage():
    run = trainer()
    fresh = Asker(run, [0, 2, 3, -1])
    waiting = fresh.ask(0)
    waiting.join(WAIT_S)
    run.end()  # the training sandbox has ended (killed, exited) before step 0's answer
    waiting.join(10)
    assert fresh.replies == [{"kind": "stop"}] and fresh.sent == []

    run = trainer()
    fresh = Asker(run, [0, 2, 3, -1])
    answer(run, 0)
    fresh.ask(0).join(10)
    waiting = fresh.ask(2)
    answer(run, 1, grads=torch.tensor([1.0, float("nan"), 0.0]))  # the judge stops the run: the gradient diverged
    waiting.join(10)
    assert run.failure and [h["kind"] for h in fresh.replies] == ["tensors", "stop"]


def test_the_run_has_begun_only_once_its_initial_weights_are_in():
    hp = {"steps": 2, "lr": 0.01, "betas": [0.9, 0.999], "weight_decay": 0.0, "clip": 1.0}
    run = Trainer("run", hp, lambda step: torch.zeros(1, 2, dtype=torch.long), 4, -100, [0, 1], (1, 2))
    begun = []
    waiting = threading.Thread(target=lambda: begun.append(run.wait_until(None)), daemon=True)
    waiting.start()
    waiting.join(WAIT_S)
    assert waiting.is_alive()
    run.on_ask({"kind": "init", "step": -1, "stage": "run"}, encode_tensors({"w": torch.ones(3)}), lambda *a: None)
    waiting.join(10)
    assert begun == [True]


def test_which_steps_were_checked_so_far_tells_nothing_about_the_rest():
    """Drawn one by one: the checks still to come do not depend on how many came already (with a fixed count
    drawn at once, six early checks would mean none later)."""
    steps, half = 300, 150
    later_by_earlier = {}
    counts = []
    for n in range(3000):
        picked = verification_steps(f"secret-{n}", "training.run", steps, 6)
        assert picked[0] == 0 and picked[-1] == steps - 1 and picked == sorted(set(picked))
        inner = [s for s in picked if 0 < s < steps - 1]
        counts.append(len(inner))
        early = sum(s < half for s in inner)
        later_by_earlier.setdefault(min(early, 5), []).append(len(inner) - early)
    assert abs(statistics.mean(counts) - 6) < 0.3 and statistics.pstdev(counts) > 1.5
    means = {k: statistics.mean(v) for k, v in later_by_earlier.items() if len(v) >= 50}
    assert {0, 1, 2, 3, 4, 5} <= means.keys(), means
    assert max(means.values()) - min(means.values()) < 0.6, means  # about 3 later checks, whatever came before


def test_each_checked_steps_direction_comes_from_its_own_seed():
    """The fresh sandbox is sent each checked step's direction as it checks: one generator for all would let the
    directions it has seen give away the next (a generator's state follows from its outputs)."""
    draw = lambda step: torch.randn(1000, generator=direction_generator("secret", "training.run", step))  # noqa: E731
    later_first = draw(95)
    earlier = draw(41)
    assert torch.equal(draw(95), later_first) and torch.equal(draw(41), earlier)  # whatever was drawn before
    assert not torch.equal(earlier, later_first)
    other = torch.randn(1000, generator=direction_generator("another secret", "training.run", 95))
    assert not torch.equal(other, later_first)
