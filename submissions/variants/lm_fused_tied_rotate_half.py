"""Correct variant, Track B: fused qkv projection, tied input/output embeddings, rotate-half RoPE, per-row positions.

Same contract as submissions/reference_lm.py, written differently:
- one Linear(D, 3D) gives queries, keys and values; the head reuses the token embedding matrix;
- RoPE in the "rotate-half" form x*cos + rotate_half(x)*sin (half-split pairing: channel i with i + Dh/2);
- positions are (B, T) per row (the same offsets for every row; apply_rope accepts both shapes);
- the cache is a tuple (key_mask (B, P), ((k, v) per layer)), keys stored already rotated.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

TRACK = "lm"


def split_heads(x, num_heads):
    """(B, T, D) -> (B, H, T, D/H); head h holds channels h*Dh .. (h+1)*Dh - 1."""
    batch, length, width = x.shape
    if num_heads <= 0 or width % num_heads:
        raise ValueError(f"width {width} does not divide into {num_heads} heads")
    return x.view(batch, length, num_heads, width // num_heads).permute(0, 2, 1, 3)  # (B, H, T, Dh)


def merge_heads(x):
    """(B, H, T, Dh) -> (B, T, H*Dh), the inverse of split_heads."""
    batch, heads, length, head_dim = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch, length, heads * head_dim)  # (B, T, D)


def attention(q, k, v, mask=None):
    """Softmax(q k^T / sqrt(Dh)) v over the key axis; mask True = may attend; returns (out, weights)."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    if mask is not None:
        allowed = torch.broadcast_to(torch.as_tensor(mask, dtype=torch.bool), scores.shape)  # (B, H, Tq, Tk)
        if not bool(allowed.any(dim=-1).all()):
            raise ValueError("a query row has no allowed key")
        scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    weights = scores.softmax(dim=-1)  # (B, H, Tq, Tk)
    return torch.matmul(weights, v), weights  # (B, H, Tq, Dh)


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) on the two halves of the last axis."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, positions):
    """Rotate channel i with channel i + Dh/2 by pos * 10000^(-2i/Dh); positions (T,) or (B, T)."""
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head width, got {head_dim}")
    positions = torch.as_tensor(positions)
    if positions.dim() not in (1, 2) or positions.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions must be (T,) or (B, T) with T={x.shape[-2]}, got {tuple(positions.shape)}")
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=x.dtype) / head_dim)  # (Dh/2,)
    angles = positions.to(x.dtype).unsqueeze(-1) * inv_freq  # (T, Dh/2) or (B, T, Dh/2)
    angles = torch.cat((angles, angles), dim=-1)  # (..., T, Dh): channel i and i + Dh/2 share an angle
    if angles.dim() == 3:
        angles = angles.unsqueeze(1)  # (B, 1, T, Dh)
    return x * angles.cos() + rotate_half(x) * angles.sin()


class Block(nn.Module):
    """Pre-norm block with one fused qkv projection."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.n_heads = n_heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, mask, past=None):
        """x (B, T, D), positions (B, T), mask (B, 1, T, P+T) -> ((B, T, D), (k, v))."""
        q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        q, k = apply_rope(q, positions), apply_rope(k, positions)  # (B, H, T, Dh)
        if past is not None:
            k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)  # (B, H, P+T, Dh)
        out, _ = attention(q, k, v, mask)
        x = x + self.drop(self.proj(merge_heads(out)))
        x = x + self.drop(self.fc2(F.gelu(self.fc1(self.norm2(x)))))
        return x, (k, v)


class TiedLM(nn.Module):
    """Decoder-only LM whose output layer is the transposed token embedding."""

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embed.weight, std=d_model ** -0.5)  # tied: keep the initial logits near unit scale
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, ids, mask=None, cache=None):
        """ids (B, T), mask (B, T) True = real -> (logits (B, T, V), cache)."""
        batch, length = ids.shape
        mask = torch.ones(batch, length, dtype=torch.bool) if mask is None else mask.to(torch.bool)
        past_mask, pasts = (mask[:, :0], (None,) * len(self.blocks)) if cache is None else cache
        keys = torch.cat((past_mask, mask), dim=1)  # (B, P+T), True = real key
        start = past_mask.shape[1]
        positions = torch.arange(start, start + length).expand(batch, length)  # (B, T)
        key_pos = torch.arange(start + length)  # (P+T,)
        allowed = (key_pos <= positions[..., None]) & keys[:, None, :]  # (B, T, P+T): causal, real keys
        allowed = allowed | (key_pos == positions[..., None])  # a padded query still sees itself
        x = self.drop(self.embed(ids))  # (B, T, D)
        presents = []
        for block, past in zip(self.blocks, pasts):
            x, present = block(x, positions, allowed[:, None], past)
            presents.append(present)
        logits = F.linear(self.norm(x), self.embed.weight, self.out_bias)  # (B, T, V)
        return logits, (keys, tuple(presents))


def build_model(config):
    """The Track B model from the config; unknown keys ignored."""
    if config.get("arch", "decoder") != "decoder":
        raise ValueError("this Track B submission builds arch='decoder' only")
    return TiedLM(int(config["vocab_size"]), int(config["d_model"]), int(config["n_heads"]),
                  int(config["n_layers"]), int(config["d_ff"]), float(config.get("dropout", 0.0)))
