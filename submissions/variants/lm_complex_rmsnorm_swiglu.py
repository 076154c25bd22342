"""Correct variant, Track B: complex-number RoPE (interleaved pairs), RMSNorm, SwiGLU, a hand-written softmax.

Same contract as submissions/reference_lm.py, written differently:
- RoPE multiplies each channel pair (2i, 2i+1), read as one complex number, by exp(i * pos * 10000^(-2i/Dh))
  (torch.view_as_complex / torch.polar);
- RMSNorm instead of LayerNorm, a SwiGLU feed-forward, bias-free projections;
- attention normalises with exp(scores - max) / sum, so masked keys (at -inf) get exactly 0;
- the cache is a dict {"key_mask": (B, P), "k": [per layer (B, H, P, Dh)], "v": [...]}.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

TRACK = "lm"


def split_heads(x, num_heads):
    """(B, T, D) -> (B, H, T, D/H)."""
    if num_heads <= 0 or x.shape[-1] % num_heads:
        raise ValueError(f"width {x.shape[-1]} is not divisible by {num_heads} heads")
    return x.unflatten(-1, (num_heads, x.shape[-1] // num_heads)).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x):
    """(B, H, T, Dh) -> (B, T, H*Dh)."""
    return x.transpose(1, 2).flatten(2)  # (B, T, D)


def attention(q, k, v, mask=None):
    """Scaled dot-product attention with an explicit, max-shifted softmax; mask True = may attend."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    if mask is not None:
        allowed = torch.broadcast_to(torch.as_tensor(mask).bool(), scores.shape)
        if not bool(allowed.any(dim=-1).all()):
            raise ValueError("attention mask leaves a query with no key")
        scores = scores.masked_fill(~allowed, float("-inf"))
    shifted = torch.exp(scores - scores.amax(dim=-1, keepdim=True))  # (B, H, Tq, Tk), masked keys exactly 0
    weights = shifted / shifted.sum(dim=-1, keepdim=True)
    return weights @ v, weights


def apply_rope(x, positions):
    """Rotate pairs (2i, 2i+1) of x (B, H, T, Dh) as complex numbers by angle pos * 10000^(-2i/Dh)."""
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"odd head width {head_dim}")
    positions = torch.as_tensor(positions)
    if positions.dim() not in (1, 2) or positions.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions must be (T,) or (B, T) with T={x.shape[-2]}")
    freqs = torch.pow(10000.0, -torch.arange(0, head_dim, 2, dtype=x.dtype) / head_dim)  # (Dh/2,)
    angles = positions.to(x.dtype)[..., None] * freqs  # (T, Dh/2) or (B, T, Dh/2)
    if angles.dim() == 3:
        angles = angles[:, None]  # (B, 1, T, Dh/2)
    turn = torch.polar(torch.ones_like(angles), angles)  # unit complex numbers
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], head_dim // 2, 2).contiguous())  # (B, H, T, Dh/2)
    return torch.view_as_real(pairs * turn).flatten(-2)  # (B, H, T, Dh)


class RMSNorm(nn.Module):
    """x / rms(x) * weight."""

    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x))."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Layer(nn.Module):
    """Pre-RMSNorm decoder layer."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.n_heads = n_heads
        self.attn_norm, self.ff_norm = RMSNorm(d_model), RMSNorm(d_model)
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wk = nn.Linear(d_model, d_model, bias=False)
        self.wv = nn.Linear(d_model, d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model, bias=False)
        self.ff = SwiGLU(d_model, d_ff)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, mask, past_k=None, past_v=None):
        """x (B, T, D) -> ((B, T, D), k, v) with k, v (B, H, P+T, Dh)."""
        h = self.attn_norm(x)
        q = apply_rope(split_heads(self.wq(h), self.n_heads), positions)
        k = apply_rope(split_heads(self.wk(h), self.n_heads), positions)
        v = split_heads(self.wv(h), self.n_heads)
        if past_k is not None:
            k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        out, _ = attention(q, k, v, mask)
        x = x + self.drop(self.wo(merge_heads(out)))
        return x + self.drop(self.ff(self.ff_norm(x))), k, v


class LM(nn.Module):
    """Decoder-only LM: embedding, RMSNorm/SwiGLU layers with complex RoPE, RMSNorm, head."""

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(Layer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids, mask=None, cache=None):
        """ids (B, T), mask (B, T) True = real -> (logits (B, T, V), cache)."""
        batch, length = ids.shape
        real = torch.ones(batch, length, dtype=torch.bool) if mask is None else mask.bool()
        if cache is None:
            cache = {"key_mask": real[:, :0], "k": [None] * len(self.layers), "v": [None] * len(self.layers)}
        start = cache["key_mask"].shape[1]
        key_mask = torch.cat((cache["key_mask"], real), dim=1)  # (B, P+T)
        query_pos = torch.arange(start, start + length)[:, None]  # (T, 1)
        key_pos = torch.arange(start + length)[None, :]  # (1, P+T)
        allowed = ((key_pos <= query_pos) & key_mask[:, None, :]) | (key_pos == query_pos)  # (B, T, P+T)
        x = self.drop(self.embed(ids))
        new = {"key_mask": key_mask, "k": [], "v": []}
        for layer, past_k, past_v in zip(self.layers, cache["k"], cache["v"]):
            x, k, v = layer(x, query_pos[:, 0], allowed[:, None], past_k, past_v)
            new["k"].append(k)
            new["v"].append(v)
        return self.head(self.norm(x)), new


def build_model(config):
    """The Track B model from the config; unknown keys ignored."""
    if config.get("arch", "decoder") != "decoder":
        raise ValueError("this Track B submission builds arch='decoder' only")
    return LM(int(config["vocab_size"]), int(config["d_model"]), int(config["n_heads"]), int(config["n_layers"]),
              int(config["d_ff"]), float(config.get("dropout", 0.0)))
