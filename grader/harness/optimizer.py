"""The training step both sides take: the clip and AdamW on one flat tensor, and the digest of the weights.

The judge owns the weights and steps them with this code. The sandbox runs the same code on its own copy to guess
the judge's next weights and start the next step without waiting for them (grader/trainer.py says how the judge
confirms the guess). Elementwise torch and Python sums only: the same bits in the judge and in the sandbox, whatever
the number of threads. Torch and the standard library only: it runs in both.
"""
import hashlib

import torch


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


def weights_digest(flat: torch.Tensor) -> str:
    """A digest of one flat float32 tensor's bytes: equal digests, equal weights (0.25 ms for 100k numbers)."""
    return hashlib.sha256(flat.detach().contiguous().numpy()).hexdigest()[:32]
