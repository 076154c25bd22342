"""Memory bomb past the per-process limit: helpers each stay under it, together they exceed the sandbox's memory.

Only the whole-sandbox cap (cgroup or container) can stop this; the helpers it kills leave the
stage sleeping, so the stage times out, and the harness must survive to grade the next check.
"""
EXPECT = {"attention_sdpa": "timeout"}
import os as _os
import time as _time

CHUNK = 32 << 20


def attention(q, k, v, mask=None):
    for _ in range(8):
        if _os.fork() == 0:
            hoard = []
            try:
                for _ in range(10):  # 320 MiB each, 2.5 GiB in all
                    chunk = bytearray(CHUNK)
                    chunk[::4096] = b"x" * (CHUNK // 4096)  # touch every page: real memory
                    hoard.append(chunk)
            except MemoryError:
                pass
            _time.sleep(3600)
            _os._exit(0)
    _time.sleep(3600)
