"""Oversized results: attention returns a 24 MiB tensor, over the sandbox's output limit; the judge reports it, unread."""
EXPECT = {"attention_sdpa": "crash"}
EXPECT_MESSAGE = {"attention_sdpa": "too large"}
import torch as _torch

_reference_attention = attention
_calls = []


def attention(q, k, v, mask=None):
    out, weights = _reference_attention(q, k, v, mask)
    if not _calls:
        _calls.append(True)
        return out, _torch.zeros(3 << 20, dtype=_torch.float64)  # 24 MiB of "weights"
    return out, weights
