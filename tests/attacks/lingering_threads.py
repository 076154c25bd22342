"""Threads outliving the call: attention starts non-daemon threads that spin forever, then answers correctly."""
# The spinning threads take the GIL from the check itself: on a loaded machine it can run past its 3 s
# budget. Either verdict is right; what the attack tests is that no thread outlives the run and the
# other checks keep theirs.
EXPECT = {"attention_sdpa": ("pass", "timeout")}
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
