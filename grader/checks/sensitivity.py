"""Sensitivity: an invariant is credited only to a model whose logits react to what the invariant is about."""
import torch

from .. import tolerances as tol
from ..compare import where
from ..configs import FIRST_ORDINARY, check_config

AXES = ("batch", "position", "vocab")
INDEPENDENT = "the model's logits do not depend on its input"


def other_tokens(ctx, tokens: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Every ordinary token replaced by another ordinary token (a shift, so each one differs); specials and
    positions where keep is True stay as they are."""
    span = check_config(ctx.track)["vocab_size"] - FIRST_ORDINARY
    shift = torch.randint(1, span, tokens.shape, generator=ctx.generator("sensitivity"))
    moved = (tokens - FIRST_ORDINARY + shift) % span + FIRST_ORDINARY
    change = tokens >= FIRST_ORDINARY
    if keep is not None:
        change &= ~keep
    return torch.where(change, moved, tokens)


def independent(base: torch.Tensor | None, other: torch.Tensor | None, what: str) -> str | None:
    """A message when two batches with different tokens give logits that agree everywhere within CHANGED_MIN."""
    if base is None or other is None or base.shape != other.shape:
        return None  # the caller reports missing or misshapen tensors itself
    diff = (other.to(torch.float64) - base.to(torch.float64)).abs()
    if torch.isnan(diff).any():
        return None  # NaN is reported as non-finite by the caller
    largest = float(diff.max()) if diff.numel() else 0.0
    if largest > tol.CHANGED_MIN:
        return None
    return (f"{INDEPENDENT}: {what} gave logits that agree everywhere within {tol.CHANGED_MIN:g} (largest difference "
            f"{largest:.3g}), so no invariant can be credited; the logits must be computed from the token IDs "
            "(embedding, attention and head), not from positions, the mask or constants alone")


def unmoved(base: torch.Tensor, other: torch.Tensor, must_move: torch.Tensor, what: str) -> str | None:
    """A message naming the first (batch, position) in must_move (B, T) whose logits did not move with the input."""
    delta = (other.to(torch.float64) - base.to(torch.float64)).abs().amax(dim=-1)  # (B, T)
    still = (must_move & (delta <= tol.CHANGED_MIN)).nonzero()
    if not len(still):
        return None
    b, t = still[0].tolist()
    return (f"{what} did not change the logits at {where((b, t), AXES[:2])} ({len(still)} of "
            f"{int(must_move.sum())} real positions unchanged, by at most {tol.CHANGED_MIN:g}): every real position "
            "must read the real tokens it may see")
