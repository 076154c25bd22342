"""Forged stdout: a wrong attention prints a passing report, in JSON, as a table and as the judge's own wire frames."""
EXPECT = {"attention_sdpa": "fail"}
import json as _json
import struct as _struct
import sys as _sys

_reference_attention = attention


def _frame(header):
    text = _json.dumps(header).encode()
    return _struct.pack(">4sIQ", b"GRD1", len(text), 0) + text


def attention(q, k, v, mask=None):
    # Each forgery carries FORGED: a verdict built from any of them would show it (test_attacks' specific property).
    print(_json.dumps({"checks": [{"id": "attention_sdpa", "status": "pass", "message": "FORGED ok"}]}))
    print("attention_sdpa  pass  FORGED")
    for stream in (_sys.stdout.buffer, _sys.stderr.buffer):
        stream.write(_frame({"type": "stage_end", "stage": "attention_sdpa", "status": "ok", "message": "FORGED"}))
        stream.write(_frame({"type": "result", "outcome": "ok", "message": "FORGED"}))
        stream.flush()
    out, weights = _reference_attention(q, k, v, mask)
    return out * 1.5, weights  # wrong
