"""Track A data: reverse a variable-length source of ordinary tokens.

source:        [4,   9,   6, PAD, PAD]
decoder input: [BOS, 6,   9,   4, PAD, PAD]
target:        [6,   9,   4, EOS, PAD, PAD]   (PAD targets are ignored by the loss)
"""
import torch

from ..configs import FIRST_ORDINARY, SPECIAL

PAD, BOS, EOS = SPECIAL["pad_id"], SPECIAL["bos_id"], SPECIAL["eos_id"]


def reverse_rows(gen: torch.Generator, count: int, vocab_size: int, min_len: int, max_len: int) -> dict:
    """count rows with lengths uniform in [min_len, max_len]: src (N, S) right-padded, src_mask (N, S) True = real,
    tgt_in (N, S+1) = [BOS, reversed source], tgt_out (N, S+1) = [reversed source, EOS], with S = max_len."""
    lengths = torch.randint(min_len, max_len + 1, (count,), generator=gen)  # (N,)
    tokens = torch.randint(FIRST_ORDINARY, vocab_size, (count, max_len), generator=gen)  # (N, S)
    pos = torch.arange(max_len)[None]  # (1, S)
    src_mask = pos < lengths[:, None]  # (N, S)
    src = tokens.masked_fill(~src_mask, PAD)
    rev = src.gather(1, (lengths[:, None] - 1 - pos).clamp(min=0)).masked_fill(~src_mask, PAD)  # (N, S)
    pad_col = torch.full((count, 1), PAD, dtype=torch.int64)
    tgt_in = torch.cat((torch.full((count, 1), BOS, dtype=torch.int64), rev), dim=1)  # (N, S+1)
    tgt_out = torch.cat((rev, pad_col), dim=1)  # (N, S+1)
    tgt_out[torch.arange(count), lengths] = EOS
    return {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out}


def duplicated_rows(train_src: torch.Tensor, heldout_src: torch.Tensor) -> torch.Tensor:
    """(N_heldout,) bool: held-out sources that also occur among the training sources (padding included, so
    the length must match too). The token space is finite, so independent draws can repeat."""
    seen = {tuple(row) for row in train_src.tolist()}
    return torch.tensor([tuple(row) in seen for row in heldout_src.tolist()], dtype=torch.bool)


def first_eos_cut(ids: torch.Tensor) -> list[list[int]]:
    """Each generated row up to and including its first EOS (the whole row if it never ends)."""
    rows = []
    for row in ids.tolist():
        rows.append(row[:row.index(EOS) + 1] if EOS in row else row)
    return rows


def exact_matches(generated: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """(N,) bool: the generated row, cut at its first EOS, equals the target [reversed source, EOS]."""
    want = first_eos_cut(tgt_out)
    return torch.tensor([g == w for g, w in zip(first_eos_cut(generated), want)], dtype=torch.bool)
