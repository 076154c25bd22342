"""What a fresh sandbox's stage needs of the judge's training run, sent when it asks and the run has got that far.

The fresh sandbox runs while the first one trains (grader/judge.py): the verification asks for each checked step's
weights and direction, the evaluation for the final weights. The judge replies only once its own run has taken that
step (the training sandbox's answer for it is in and kept), so the fresh sandbox never learns a step before the
training sandbox has answered it; which steps are checked is drawn step by step (grader/trainer.py), so the ones
it has been given tell nothing about the ones to come. A question out of order, or one the stage has no business
asking, is answered with stop: the stage then fails on its own, and its check says so.
"""
from .harness.tensorbytes import encode_tensors


class Feed:
    """Answers one fresh stage's questions ("need", step) in the order the judge expects them."""

    def __init__(self, run, tensors, order):
        self.run = run  # the Stage of the training run it is fed from (its trainer, its key)
        self.tensors = tensors  # step -> the tensors to send, called once the run has taken the step (-1: the end)
        self.order = list(order)  # the steps the stage asks for, in this order

    def on_ask(self, header: dict, blob: bytes, reply) -> None:
        """Wait for the run to reach the step asked for, then send its tensors; stop for anything else."""
        step = header.get("step")
        if header.get("kind") != "need" or not self.order or step != self.order[0]:
            self.order = []  # a stage that asks out of turn gets nothing more
            reply({"kind": "stop"})
            return
        self.order.pop(0)
        if not self.run.trainer.wait_until(step):
            reply({"kind": "stop"})  # the run failed or ended short: the judge reports the stage skipped
            return
        reply({"kind": "tensors", "step": step}, encode_tensors(self.tensors(step)))


def final_weights(run, prefix: str = "trained/") -> Feed:
    """A feed of the run's final weights (the judge's), asked for once, after the last step."""
    return Feed(run, lambda step: {prefix + k: v for k, v in run.trainer.final_weights().items()}, [-1])
