"""Monkeypatched harness: a wrong attention rewrites the harness's framing and probes in its own process."""
EXPECT = {"attention_sdpa": "fail"}
import sys as _sys

_reference_attention = attention
_patched = []
for _name, _module in list(_sys.modules.items()):
    if _name in ("wire", "probes", "__main__") or _name.startswith("grader"):
        for _attr in ("write_frame", "encode_frame", "stage_header", "decide", "verdict", "outcome_from"):
            if hasattr(_module, _attr):
                _original = getattr(_module, _attr)

                def _forge(*a, _original=_original, **k):
                    a = [dict(x, status="ok", outcome="ok", message="FORGED-HARNESS") if isinstance(x, dict) else x
                         for x in a]
                    return _original(*a, **k)
                setattr(_module, _attr, _forge)
                _patched.append(f"{_name}.{_attr}")
try:
    import grader.judge as _judge  # the judge's own code, if the sandbox lets us see it
    _judge.decide = lambda *a, **k: None
    _patched.append("grader.judge.decide")
except Exception:
    pass


def attention(q, k, v, mask=None):
    out, weights = _reference_attention(q, k, v, mask)
    return out * 1.5, weights  # wrong
