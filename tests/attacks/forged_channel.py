"""Forged channel: a wrong attention writes passing frames (stage ends, and verdicts as only the judge sends them) to
every fd it has and every fd it can open in /proc."""
EXPECT = {"attention_sdpa": "fail"}
import json as _json
import os as _os
import struct as _struct

_reference_attention = attention


def _frame(header):
    text = _json.dumps(header).encode()
    return _struct.pack(">4sIQ", b"GRD1", len(text), 0) + text


FORGED = _frame({"type": "stage_end", "stage": "attention_sdpa", "status": "ok", "message": "FORGED-FRAME"}) + \
    _frame({"type": "stage_end", "stage": "rope", "status": "ok", "message": "FORGED-FRAME"}) + \
    _frame({"type": "verdict", "check": {"id": "attention_sdpa", "status": "pass", "message": "FORGED-VERDICT"}}) + \
    _frame({"type": "done"})


def attention(q, k, v, mask=None):
    for fd in range(3, 256):
        try:
            _os.write(fd, FORGED)
        except OSError:
            pass
    for pid in {str(_os.getppid()), "1", "2"}:
        try:
            names = _os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                fd = _os.open(f"/proc/{pid}/fd/{name}", _os.O_WRONLY)
                _os.write(fd, FORGED)
                _os.close(fd)
            except OSError:
                pass
    out, weights = _reference_attention(q, k, v, mask)
    return out * 1.5, weights  # wrong
