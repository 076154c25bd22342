"""Memory bomb: attention allocates 64 MiB tensors until the memory limit refuses."""
EXPECT = {"attention_sdpa": "oom"}
import torch as _torch


def attention(q, k, v, mask=None):
    hoard = []
    while True:
        hoard.append(_torch.ones(64 << 20, dtype=_torch.uint8))
