"""Busy loop: attention spins on the CPU forever."""
EXPECT = {"attention_sdpa": "timeout"}


def attention(q, k, v, mask=None):
    n = 0
    while True:
        n += 1
