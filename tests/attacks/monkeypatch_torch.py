"""Monkeypatched torch: every comparison says "equal", and a wrong attention hopes the grader asks torch."""
EXPECT = {"attention_sdpa": "fail"}
import torch as _torch
import torch.nn.functional as _F

_torch.allclose = lambda *a, **k: True
_torch.equal = lambda *a, **k: True
_torch.isclose = lambda a, b, *r, **k: _torch.ones_like(a, dtype=_torch.bool)
_torch.testing.assert_close = lambda *a, **k: None
_torch.Tensor.__eq__ = lambda self, other: _torch.ones((), dtype=_torch.bool)
_F.scaled_dot_product_attention = lambda q, k, v, *a, **kw: _torch.zeros_like(q)
_reference_attention = attention


def attention(q, k, v, mask=None):
    out, weights = _reference_attention(q, k, v, mask)
    return out * 1.5, weights  # wrong
