"""The cyclic-pattern task for decoder-only models: a mechanics check for causal attention and cached decoding.

Each row repeats a random pattern of ordinary tokens with a period in [min_period, max_period]:
period 3, pattern [7, 4, 9] -> [7, 4, 9, 7, 4, 9, 7, ...]. Within the first period nothing can be
predicted, so those targets are PAD and ignored; after it, the next token is determined by the
token one period back. It is not text, and its accuracy is not language accuracy.
"""
import torch

from ..configs import FIRST_ORDINARY, SPECIAL


def cyclic_rows(gen: torch.Generator, count: int, vocab_size: int, length: int, min_period: int,
                max_period: int) -> dict:
    """rows (N, length + 1) of repeated patterns; targets (N, length) = rows[:, 1:] with PAD where the token
    is still inside the first period; period (N,)."""
    period = torch.randint(min_period, max_period + 1, (count,), generator=gen)  # (N,)
    pattern = torch.randint(FIRST_ORDINARY, vocab_size, (count, max_period), generator=gen)  # (N, P)
    rows = pattern.gather(1, torch.arange(length + 1)[None] % period[:, None])  # (N, length + 1)
    targets = rows[:, 1:].clone()  # (N, length): target t is token t + 1
    targets[torch.arange(length)[None] + 1 < period[:, None]] = SPECIAL["pad_id"]
    return {"rows": rows, "targets": targets, "period": period}
