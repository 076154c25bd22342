"""The judge's side of training: it keeps the weights and the optimizer; the sandbox only answers its questions.

Each step the judge sends the weights, the sandbox returns the step batch's logits and the gradient of the mean
cross-entropy; the judge recomputes the loss from the logits (float64), clips the gradient at 1.0 and takes the
AdamW step itself. The steps it will check later in a fresh sandbox are drawn from randomness the sandbox never
sees (the grading's secret seed); for those it keeps the weights, logits and gradient. Whatever comes back is
validated first: a bad answer ends the run with a message naming the step, never an exception in the judge.
"""
import hashlib
import random

import torch
import torch.nn.functional as F
from .harness.tensorbytes import encode_tensors

from .tensors import BadTensors, all_finite, decode_tensors

MAX_PARAMETERS = 10_000_000  # numbers in the model: far above the contract's small training configs
MAX_TENSORS = 1024
MAX_NAME = 200


class TrainingFailed(Exception):
    """The sandbox's answer cannot be used; the message names the step and the problem."""


def clip_norm(flat: torch.Tensor, max_norm: float) -> float:
    """Scale the flat gradient in place to a norm of at most max_norm, as clip_grad_norm_ does; return the norm
    before clipping. Summed in chunks below torch's parallel grain in float64, in Python: the same number whatever
    the number of threads, so the judge's trajectory is the same on every machine."""
    total = sum(float(chunk.pow(2).sum()) for chunk in flat.double().split(16384))
    norm = total ** 0.5
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0:
        flat.mul_(coef)
    return norm


def verification_steps(secret: str, label: str, steps: int, count: int) -> list[int]:
    """The steps to check in a fresh sandbox: the first, the last and `count` drawn from the secret seed."""
    digest = hashlib.sha256(f"{secret}/{label}/verify".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    picked = rng.sample(range(1, max(1, steps - 1)), min(count, max(0, steps - 2))) if steps > 2 else []
    return sorted({0, steps - 1, *picked})


def direction_generator(secret: str, label: str) -> torch.Generator:
    """Random directions for the finite-difference check, from the secret seed (never sent to the sandbox)."""
    digest = hashlib.sha256(f"{secret}/{label}/direction".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:7], "big"))


class AdamW:
    """torch.optim.AdamW's update (decoupled weight decay, bias-corrected moments) on one flat tensor of all the
    parameters, written out: elementwise only, so the same numbers on any machine, a handful of operations a step
    rather than a handful per parameter, and none of the optimizer package's first-use imports (seconds)."""

    def __init__(self, sizes: list, lr: float, betas, weight_decay: float, eps: float = 1e-8):
        self.lr, self.betas, self.weight_decay, self.eps = lr, tuple(betas), weight_decay, eps
        self.spans, start = [], 0
        for n in sizes:
            self.spans.append((start, start + n))
            start += n
        self.steps = [0] * len(sizes)  # per parameter, as torch counts them: a step without a gradient is none
        self.m = torch.zeros(start)
        self.v = torch.zeros(start)

    @torch.no_grad()
    def step(self, flat: torch.Tensor, grad: torch.Tensor, present: list) -> None:
        """One update of every parameter that has a gradient (present[i]); the others are left as they are."""
        for i, has in enumerate(present):
            self.steps[i] += bool(has)
        if all(present) and len(set(self.steps)) == 1:  # the usual case: one update of everything at once
            self._update(flat, grad, self.m, self.v, self.steps[0])
            return
        for (a, b), has, step in zip(self.spans, present, self.steps):
            if has:
                self._update(flat[a:b], grad[a:b], self.m[a:b], self.v[a:b], step)

    def _update(self, p, g, m, v, step: int) -> None:
        beta1, beta2 = self.betas
        p.mul_(1 - self.lr * self.weight_decay)
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = (v.sqrt() / (1 - beta2 ** step) ** 0.5).add_(self.eps)
        p.addcdiv_(m, denom, value=-self.lr / (1 - beta1 ** step))


def flatten(tensors) -> torch.Tensor:
    """One flat tensor of the given tensors, in order."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def encode(tensors: dict) -> bytes:
    """Tensors for the sandbox, as safetensors."""
    return encode_tensors(tensors)


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

    # ---- the conversation ----------------------------------------------------------------------------------------

    def on_ask(self, header: dict, blob: bytes, reply) -> None:
        """One question from the sandbox: validate it, take the step, send the next weights (or stop)."""
        if self.done or self.failure:
            reply({"kind": "stop"})
            return
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
        if self.failure or self.done:
            reply({"kind": "stop"})
        else:
            # one flat tensor, parameters in sorted name order: encoding 50 small tensors costs more than a step
            reply({"kind": "step", "step": self.step}, encode({"weights": self.flat}))
        self._record_loss()  # after the reply: the sandbox computes the next step meanwhile

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

    # ---- what the checks use afterwards --------------------------------------------------------------------------

    def final_weights(self) -> dict:
        """The weights after the last step (the judge's own)."""
        return {k: v.clone() for k, v in self.params.items()}

    def directions(self, gen: torch.Generator) -> dict:
        """Per checked step, a unit direction over all parameters: half the returned gradient's, half random.

        Along the gradient's own direction a forged gradient shows at full size; the random half keeps the
        sandbox from knowing the direction in advance.
        """
        found = {}
        for step, kept in sorted(self.kept.items()):
            grads = kept.get("grads", {})
            gnorm = sum(float(g.double().pow(2).sum()) for g in grads.values()) ** 0.5
            rand = {k: torch.randn(v.shape, generator=gen, dtype=torch.float64) for k, v in self.params.items()}
            rnorm = sum(float(r.pow(2).sum()) for r in rand.values()) ** 0.5
            d = {k: rand[k] / rnorm + (grads[k].double() / gnorm if gnorm > 0 and k in grads else 0)
                 for k in self.params}
            dnorm = sum(float(v.pow(2).sum()) for v in d.values()) ** 0.5
            found[step] = {k: v / dnorm for k, v in d.items()}
        return found
