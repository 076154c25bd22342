"""Killing the harness: attention sends SIGKILL to its parent; later checks cannot run and must say so, earlier ones keep their verdict."""
EXPECT = {"attention_sdpa": "crash", "rope": "crash"}
EXPECT_MESSAGE = {"rope": "stopped before this check started"}
import os as _os
import signal as _signal
import time as _time


def attention(q, k, v, mask=None):
    _os.kill(_os.getppid(), _signal.SIGKILL)
    _time.sleep(3600)
