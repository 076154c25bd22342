"""Sleep: attention sleeps for an hour."""
EXPECT = {"attention_sdpa": "timeout"}
import time as _time


def attention(q, k, v, mask=None):
    _time.sleep(3600)
