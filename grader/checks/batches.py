"""Model inputs for the checks, for either track."""
import torch

from ..configs import SPECIAL


def source_batch(ctx, gen, batch: int, length: int, pads: list[int]) -> dict:
    """Track A source: ordinary tokens, row i right-padded with pads[i] PAD tokens; mask True = real token."""
    src = ctx.tokens(gen, batch, length)
    mask = torch.ones(batch, length, dtype=torch.bool)
    for row, n in enumerate(pads):
        if n:
            mask[row, length - n:] = False
    return {"src": src.masked_fill(~mask, SPECIAL["pad_id"]), "src_mask": mask}


def target_batch(ctx, gen, batch: int, length: int) -> torch.Tensor:
    """Track A decoder input: BOS then ordinary tokens."""
    tgt = ctx.tokens(gen, batch, length)
    tgt[:, 0] = SPECIAL["bos_id"]
    return tgt


def model_batch(ctx, gen, batch: int, length: int) -> dict:
    """A batch for a model forward in the submission's track (Track A: padded source and a target)."""
    if ctx.track == "lm":
        return {"ids": ctx.tokens(gen, batch, length)}
    return {**source_batch(ctx, gen, batch, length - 1, [0, 2][:batch] + [1] * max(0, batch - 2)),
            "tgt": target_batch(ctx, gen, batch, length)}


def sequence_key(track: str) -> str:
    """The input that holds the causal sequence: ids for Track B, tgt for Track A."""
    return "ids" if track == "lm" else "tgt"
