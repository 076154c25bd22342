"""Threads outliving the call: attention starts non-daemon threads that spin forever, then answers correctly."""
EXPECT = {"attention_sdpa": "pass"}
import threading as _threading

_reference_attention = attention
_threads = []


def _spin():
    n = 0
    while True:
        n += 1


def attention(q, k, v, mask=None):
    if not _threads:
        for _ in range(4):
            t = _threading.Thread(target=_spin, daemon=False)
            t.start()
            _threads.append(t)
        _threading.Timer(3600, print).start()
    return _reference_attention(q, k, v, mask)
