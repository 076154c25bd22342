"""stdout and stderr floods: attention prints 64 MiB to each, then answers correctly."""
EXPECT = {"attention_sdpa": "pass"}
import os as _os
import sys as _sys

_reference_attention = attention
_flooded = []


def attention(q, k, v, mask=None):
    if not _flooded:
        _flooded.append(True)
        line = "FLOOD " * 170 + "\n"  # about 1 KiB
        for _ in range(32 << 10):
            try:
                _sys.stdout.write(line)
                _sys.stderr.write(line)
            except OSError:
                break  # the file size limit refused: stop, as a real program would fail here
        for _ in range(32 << 10):
            try:
                _os.write(1, line.encode())
                _os.write(2, line.encode())
            except OSError:
                break
    return _reference_attention(q, k, v, mask)
