"""The judge's side of training: it keeps the weights and the optimizer; the sandbox only answers its questions.

Each step the sandbox returns the step batch's logits and the gradient of the mean cross-entropy at the judge's
weights; the judge recomputes the loss from the logits (float64), clips the gradient at 1.0 and takes the AdamW step
itself. The steps a fresh sandbox checks (alongside, as the run reaches them: grader/feed.py) are drawn from
randomness the sandbox never sees (the grading's secret seed); for those it keeps the weights, logits and gradient.
Whatever comes back is validated first:
a bad answer ends the run with a message naming the step, never an exception in the judge.

The sandbox does not wait for the next weights: it takes the same step on its own copy (grader/harness/optimizer.py)
and names the weights each answer was computed at by their digest. When the digest is the judge's, the judge says
"go" at once and takes its own step while the sandbox computes the next one; when it is not, the judge sends its
weights, the step is redone at them, and the run goes on as before, the judge sending its weights every step. Trust
is unchanged: what the judge keeps and checks are its own weights, and the fresh sandbox checks the answers at them.
"""
import hashlib
import threading

import torch
import torch.nn.functional as F

from .harness.optimizer import AdamW, clip_norm, weights_digest
from .harness.tensorbytes import encode_tensors
from .tensors import BadTensors, all_finite, decode_tensors

MAX_PARAMETERS = 10_000_000  # numbers in the model: far above the contract's small training configs
MAX_TENSORS = 1024
MAX_NAME = 200


class TrainingFailed(Exception):
    """The sandbox's answer cannot be used; the message names the step and the problem."""


def verification_steps(secret: str, label: str, steps: int, count: int) -> list[int]:
    """The steps to check in a fresh sandbox: the first, the last, and each step between checked on its own with
    probability count / (steps - 2), drawn from the secret seed.

    Each step is drawn on its own (not `count` of them at once), by sha256 of the secret and the step, because
    the fresh sandbox checks them while the run goes on: which earlier steps it has been given tells nothing
    about which later ones it will be.
    """
    inner = range(1, steps - 1)
    chance = min(1.0, count / len(inner)) if len(inner) else 0.0

    def drawn(step: int) -> bool:
        digest = hashlib.sha256(f"{secret}/{label}/verify/{step}".encode()).digest()
        return int.from_bytes(digest[:8], "big") < chance * 2 ** 64
    return sorted({0, steps - 1, *filter(drawn, inner)})


def direction_generator(secret: str, label: str, step: int) -> torch.Generator:
    """Random directions for one checked step's finite-difference check, from the secret seed (never sent to the
    sandbox). A generator per step, through sha256: the directions the fresh sandbox has been sent tell nothing
    about the next one (one generator's state can be recovered from its outputs), and it is checking while the
    training sandbox still runs."""
    digest = hashlib.sha256(f"{secret}/{label}/direction/{step}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:7], "big"))


def flatten(tensors) -> torch.Tensor:
    """One flat tensor of the given tensors, in order."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


class Trainer:
    """One training run driven by the judge: answers the interactive stage's questions, keeps what it checks later."""

    def __init__(self, key: str, hp: dict, targets, vocab: int, pad: int, check_steps: list[int],
                 logits_shape: tuple):
        self.key, self.hp, self.targets, self.vocab, self.pad = key, hp, targets, vocab, pad
        self.steps = int(hp["steps"])
        self.check_steps = set(check_steps)
        self.logits_shape = logits_shape  # (B, T) of one step's batch, the vocabulary added
        self.params: dict[str, torch.Tensor] = {}  # views into self.flat
        self.flat = torch.empty(0)
        self.optimizer = None
        self.step = -1  # the step whose answer is awaited (-1: the initial weights)
        self.losses, self.grad_norms = [], []
        self.first: dict = {}  # the initial weights the sandbox built
        self.kept: dict = {}  # step -> {"weights", "logits", "grads"} for the steps checked later
        self.failure: str | None = None
        self.done = False
        self.pending = None  # (step, logits) whose loss is still to be recorded
        self.speculate = True  # the sandbox steps its own copy of the weights until one differs from the judge's
        self.expected = ""  # the digest of the judge's weights for the step whose answer is awaited
        self.speculated = 0  # answers the judge let the sandbox go on from before reading them
        # The fresh sandbox's stages wait here for the steps they check (grader/feed.py); over: the sandbox that
        # trains has ended, so no step will come any more
        self.progress = threading.Condition()
        self.over = False

    # ---- the conversation ----------------------------------------------------------------------------------------

    def on_ask(self, header: dict, blob: bytes, reply) -> None:
        """One question from the sandbox: validate it, take the step, let the sandbox go on (or stop it)."""
        if self.done or self.failure:
            reply({"kind": "stop"})
            return
        early = self._ahead(header)
        if early == "redo":
            # the sandbox's own step gave other weights than the judge's: this answer is at those, so it is not
            # used; the step is redone at the judge's weights, and the judge sends them every step from now on
            self.speculate = False
            reply({"kind": "step", "step": self.step, "speculate": False}, encode_tensors({"weights": self.flat}))
            return
        if early:
            reply(early)  # before this answer is read: the sandbox computes the next step while the judge takes this
        try:
            if header.get("stage") != self.key:
                raise TrainingFailed(f"an answer came from stage {str(header.get('stage'))[:40]!r}")
            if self.step < 0:
                self._start(header, blob)
            else:
                self._take_step(header, blob)
        except TrainingFailed as exc:
            self.failure = str(exc)
        except Exception as exc:  # anything the checks above missed is still the answer's fault, never the judge's
            self.failure = f"step {self.step}: the answer could not be used ({type(exc).__name__}: {str(exc)[:200]})"
        with self.progress:
            self.progress.notify_all()
        if early is None:
            reply(*self._reply())
        if self.speculate and not self.done and not self.failure:
            self.expected = weights_digest(self.flat)  # what the sandbox's own step must give
        self._record_loss()  # after the reply: the sandbox computes the next step meanwhile

    def _reply(self) -> tuple:
        """The reply after reading an answer: stop, or the weights of the next step (with, for the first, what the
        sandbox needs to take the same steps itself)."""
        if self.failure or self.done:
            return {"kind": "stop"}, b""
        header = {"kind": "step", "step": self.step}
        if self.step == 0:
            header["speculate"] = self.speculate and self._optimizer_hp()
        # one flat tensor, parameters in sorted name order: encoding 50 small tensors costs more than a step
        return header, encode_tensors({"weights": self.flat})

    def _ahead(self, header: dict):
        """The reply to send before reading an answer computed at the judge's weights ("go", or "stop" after the
        last step); "redo" for an answer computed at other weights; None when the judge replies after reading it."""
        if not self.speculate or self.step < 0 or header.get("kind") != "grad" or header.get("step") != self.step:
            return None
        if header.get("weights") != self.expected:
            return "redo"
        self.speculated += 1
        return {"kind": "stop"} if self.step == self.steps - 1 else {"kind": "go", "step": self.step + 1}

    def _optimizer_hp(self) -> dict:
        """The clip and AdamW settings the sandbox's own step uses (the training protocol's, nothing secret)."""
        hp = self.hp
        return {"lr": float(hp["lr"]), "betas": [float(b) for b in hp["betas"]],
                "weight_decay": float(hp["weight_decay"]), "clip": float(hp["clip"])}

    def max_answer_bytes(self) -> int:
        """The largest answer a step may send: its logits and a gradient per parameter, with room for headers."""
        numel = sum(p.numel() for p in self.params.values()) or MAX_PARAMETERS
        b, t = self.logits_shape
        return 4 * (b * t * self.vocab + numel) + (1 << 20)

    def _tensors(self, blob: bytes, what: str) -> dict:
        if len(blob) > self.max_answer_bytes():
            raise TrainingFailed(f"{what}: the answer is {len(blob)} bytes, more than the {self.max_answer_bytes()} "
                                 "its logits and gradients need")
        try:
            return decode_tensors(blob)
        except BadTensors as exc:
            raise TrainingFailed(f"{what}: the returned tensors are malformed ({exc})") from None

    def _start(self, header: dict, blob: bytes) -> None:
        """The initial weights build_model made under the seed: the judge's copy starts from them."""
        if header.get("kind") != "init":
            raise TrainingFailed("the run did not start by sending the model's initial weights")
        weights = self._tensors(blob, "the initial weights")
        if not weights:
            raise TrainingFailed("the model has no parameters to train")
        if len(weights) > MAX_TENSORS or any(len(name) > MAX_NAME for name in weights):
            raise TrainingFailed(f"the model has more than {MAX_TENSORS} parameters or names longer than {MAX_NAME}")
        total = 0
        for name, value in weights.items():
            if value.dtype != torch.float32:
                raise TrainingFailed(f"parameter `{name}` is {value.dtype}, expected float32 (the training dtype)")
            if not torch.isfinite(value).all():
                raise TrainingFailed(f"parameter `{name}` holds non-finite values before training")
            total += value.numel()
        if total > MAX_PARAMETERS:
            raise TrainingFailed(f"the model has {total} parameters, more than the {MAX_PARAMETERS} allowed")
        self.first = {name: weights[name].clone() for name in sorted(weights)}
        # One flat tensor of the weights, parameters in sorted name order; self.params are views into it.
        self.flat = flatten(self.first.values()).clone()
        self.params, start = {}, 0
        for name, value in self.first.items():
            self.params[name] = self.flat[start:start + value.numel()].view(value.shape)
            start += value.numel()
        hp = self.hp
        self.optimizer = AdamW([p.numel() for p in self.params.values()], float(hp["lr"]), hp["betas"],
                               float(hp["weight_decay"]))
        self.step = 0
        self._keep_weights()

    def _keep_weights(self) -> None:
        if self.step in self.check_steps:
            self.kept[self.step] = {"weights": {k: v.clone() for k, v in self.params.items()}}

    def _take_step(self, header: dict, blob: bytes) -> None:
        """The logits and gradient at the weights sent for this step: the judge's loss, clip and AdamW step."""
        where = f"step {self.step}"
        if header.get("kind") != "grad" or header.get("step") != self.step:
            raise TrainingFailed(f"{where}: expected the answer for step {self.step}, got {str(header.get('kind'))[:20]} "
                                 f"for step {header.get('step')}")
        answer = self._tensors(blob, where)
        logits = answer.pop("logits", None)
        want = (*self.logits_shape, self.vocab)
        if logits is None or tuple(logits.shape) != want or not logits.is_floating_point():
            got = None if logits is None else tuple(logits.shape)
            raise TrainingFailed(f"{where}: the logits have shape {got}, expected {want} (B, T, V)")
        if not all_finite(logits):
            raise TrainingFailed(f"training diverged: the logits are not finite at step {self.step}")
        grad, present = self._gradients(answer, where)
        self.pending = (self.step, logits)
        if self.step in self.check_steps:
            self.kept[self.step].update(logits=logits, grads={name: value.clone() for (name, value), has in zip(
                self.unflat(grad).items(), present) if has})
        self.grad_norms.append(clip_norm(grad, float(self.hp["clip"])))
        # a parameter without a gradient is not updated, as in torch's AdamW
        self.optimizer.step(self.flat, grad, present)
        self.step += 1
        if self.step == self.steps:
            self.done = True
        else:
            self._keep_weights()

    def _record_loss(self) -> None:
        """The judge's loss of the step just taken, from the logits the sandbox returned (float64)."""
        if self.pending is None:
            return
        step, logits = self.pending
        self.pending = None
        targets = self.targets(step)  # (B, T)
        loss = F.cross_entropy(logits.double().reshape(-1, self.vocab), targets.reshape(-1), ignore_index=self.pad)
        self.losses.append(float(loss))

    def _gradients(self, answer: dict, where: str) -> tuple:
        """(the flat float32 gradient, sorted name order, zero where a parameter has none; which parameters have
        one)."""
        flat, has = answer.get("grads"), answer.get("has_grad")
        if flat is None or flat.dtype != torch.float32 or tuple(flat.shape) != tuple(self.flat.shape):
            got = None if flat is None else (tuple(flat.shape), flat.dtype)
            raise TrainingFailed(f"{where}: the gradients came as {got}, expected ({self.flat.numel()},) float32")
        if has is None or has.dtype != torch.uint8 or tuple(has.shape) != (len(self.params),):
            raise TrainingFailed(f"{where}: the gradients' mask is missing or malformed")
        if set(answer) - {"grads", "has_grad"}:
            raise TrainingFailed(f"{where}: the answer holds tensors the judge did not ask for")
        present = [bool(h) for h in has.tolist()]
        if not all(present):
            for (name, value), here in zip(self.unflat(flat).items(), present):
                if not here:
                    value.zero_()
        if not all_finite(flat):
            name = next(n for n, v in self.unflat(flat).items() if not torch.isfinite(v).all())
            raise TrainingFailed(f"training diverged: the gradient of `{name}` is not finite at step {self.step}")
        return flat, present

    def unflat(self, flat: torch.Tensor) -> dict:
        """name -> view of a flat tensor laid out like the weights."""
        views, start = {}, 0
        for name, p in self.params.items():
            views[name] = flat[start:start + p.numel()].view(p.shape)
            start += p.numel()
        return views

    def end(self) -> None:
        """The sandbox that trains has ended: whoever waits for a step that never came stops waiting."""
        with self.progress:
            self.over = True
            self.progress.notify_all()

    def wait_until(self, step: int | None) -> bool:
        """Wait until the run has taken `step` (its answer is in and kept; -1: every step; None: the run has begun);
        False if the run failed or the sandbox ended first."""
        def reached() -> bool:
            if step is None:
                return self.step >= 0
            return self.done if step < 0 else (self.step > step or self.done)
        with self.progress:
            self.progress.wait_for(lambda: reached() or self.failure is not None or self.over)
            return reached() and self.failure is None

    # ---- what the checks use afterwards --------------------------------------------------------------------------

    def final_weights(self) -> dict:
        """The weights after the last step (the judge's own)."""
        return {k: v.clone() for k, v in self.params.items()}

    def direction(self, step: int, gen: torch.Generator) -> dict:
        """For a checked step, a unit direction over all parameters: half the returned gradient's, half random.

        Along the gradient's own direction a forged gradient shows at full size; the random half keeps the
        sandbox from knowing the direction in advance.
        """
        grads = self.kept[step].get("grads", {})
        gnorm = sum(float(g.double().pow(2).sum()) for g in grads.values()) ** 0.5
        rand = {k: torch.randn(v.shape, generator=gen, dtype=torch.float64) for k, v in self.params.items()}
        rnorm = sum(float(r.pow(2).sum()) for r in rand.values()) ** 0.5
        d = {k: rand[k] / rnorm + (grads[k].double() / gnorm if gnorm > 0 and k in grads else 0) for k in self.params}
        dnorm = sum(float(v.pow(2).sum()) for v in d.values()) ** 0.5
        return {k: v / dnorm for k, v in d.items()}
