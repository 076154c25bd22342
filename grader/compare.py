"""Tensor comparisons that say what differs, by how much and where, as torch.testing.assert_close does."""
import math
from dataclasses import dataclass

import torch


def where(index, axes) -> str:
    """Name an element: 'batch 0, head 2, query 3'."""
    return ", ".join(f"{name} {int(i)}" for name, i in zip(axes, index))


@dataclass
class Mismatch:
    """The summary of two tensors that are not close."""
    count: int
    total: int
    max_abs: float
    index: tuple
    actual: float
    expected: float
    axes: tuple

    @property
    def location(self) -> str:
        """Where the largest difference is."""
        return where(self.index, self.axes)

    def describe(self, what: str) -> str:
        """One sentence for a student."""
        if not (math.isfinite(self.actual) and math.isfinite(self.expected)):
            return (f"{what}: {self.count} of {self.total} values differ; at {self.location} got {self.actual:.6g}, "
                    f"expected {self.expected:.6g} (a non-finite value never counts as equal, even to itself)")
        return (f"{what}: {self.count} of {self.total} values differ; the largest difference is "
                f"{self.max_abs:.3g} at {self.location} (got {self.actual:.6g}, expected {self.expected:.6g})")

    def metrics(self) -> dict:
        """The measured numbers."""
        return {"max_abs_diff": self.max_abs, "mismatched": self.count, "compared": self.total,
                "worst_index": list(self.index)}


def shape_problem(actual: torch.Tensor, shape: tuple, what: str, names: str) -> str | None:
    """A message when actual is missing or its shape is not the expected one."""
    if actual is None:
        return f"{what} was not returned"
    if tuple(actual.shape) != tuple(shape):
        return f"{what} has shape {tuple(actual.shape)}, expected {names} = {tuple(shape)}"
    return None


def nonfinite(actual: torch.Tensor, what: str, axes) -> str | None:
    """A message when actual holds NaN or infinity."""
    if not actual.is_floating_point():
        return None
    bad = ~torch.isfinite(actual)
    if bad.any():
        index = tuple(bad.nonzero()[0].tolist())
        kind = "NaN" if torch.isnan(actual[index]) else "infinity"
        return f"{what} contains {int(bad.sum())} non-finite values ({kind} first at {where(index, axes)})"
    return None


def unravel(flat: int, shape) -> tuple[int, ...]:
    """The index of a flat position in a tensor of this shape (row-major)."""
    # Not torch.unravel_index: its first call imports sympy, 0.7 s on the first grading of every worker process.
    index = []
    for size in reversed(tuple(shape)):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def mismatch(actual, expected, atol: float, rtol: float, axes) -> Mismatch | None:
    """None when close (|a - e| <= atol + rtol * |e| everywhere, all finite), else where and by how much.

    Non-finite values never compare equal: +inf against +inf or NaN against NaN is a mismatch, reported first.
    """
    a, e = actual.detach().to(torch.float64), expected.detach().to(torch.float64)
    diff = (a - e).abs()
    nonfinite_ = ~torch.isfinite(a) | ~torch.isfinite(e)
    bad = (diff > atol + rtol * e.abs()) | nonfinite_
    if not bad.any():
        return None
    # a non-finite position is the worst (it is named first); else the largest finite difference
    diff = torch.where(nonfinite_, torch.full_like(diff, float("inf")), diff)
    flat = int(torch.argmax(torch.where(bad, diff, torch.zeros_like(diff))))
    index = unravel(flat, diff.shape)
    return Mismatch(int(bad.sum()), bad.numel(), float(diff[index]), index, float(a[index]), float(e[index]),
                    tuple(axes))
