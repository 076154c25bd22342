"""os._exit(0) inside attention: the process vanishes with a success code and no results."""
EXPECT = {"attention_sdpa": "crash"}
EXPECT_MESSAGE = {"attention_sdpa": "exited with code 0"}
import os as _os


def attention(q, k, v, mask=None):
    _os._exit(0)
