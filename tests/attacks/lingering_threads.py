"""Threads outliving the call: attention starts non-daemon threads that never end, then answers correctly."""
# The threads loop with a sleep, so they hold no CPU and no GIL: what is tested is that a stage ends when
# its call returns, whatever threads it leaves (busy_loop is the attack that burns CPU). Spinning threads
# here made the check's own duration depend on the machine's load, and the test flaky.
EXPECT = {"attention_sdpa": "pass"}
import threading as _threading
import time as _time

_reference_attention = attention
_threads = []


def _linger():
    while True:
        _time.sleep(0.05)


def attention(q, k, v, mask=None):
    if not _threads:
        for _ in range(4):
            t = _threading.Thread(target=_linger, daemon=False)
            t.start()
            _threads.append(t)
        _threading.Timer(3600, print).start()
    return _reference_attention(q, k, v, mask)
