"""Correct variant, Track A: post-norm blocks and interleaved RoPE written with even/odd channel slices.

Same contract as submissions/reference_reverse.py, written differently:
- post-normalisation: x = norm(x + sublayer(x)) after every sub-layer (no final norm);
- RoPE pairs channel 2i with 2i+1 (interleaved), rotated by pos * 10000^(-2i/Dh);
- separate source and target embeddings;
- the cache is a list with one (k, v) tuple per decoder layer, keys stored already rotated.
"""
import math

import torch
from torch import nn

TRACK = "reverse"


def split_heads(x, num_heads):
    """(B, T, D) -> (B, H, T, D/H)."""
    batch, length, width = x.shape
    if num_heads <= 0 or width % num_heads != 0:
        raise ValueError(f"cannot split width {width} into {num_heads} heads")
    return x.reshape(batch, length, num_heads, width // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, H, T, Dh) -> (B, T, H*Dh)."""
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).contiguous().view(batch, length, heads * head_dim)


def attention(q, k, v, mask=None):
    """Scaled dot-product attention; mask True = may attend; returns (out, weights)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    if mask is not None:
        allowed = torch.as_tensor(mask, dtype=torch.bool).expand_as(scores)
        if not bool(allowed.any(-1).all()):
            raise ValueError("some query may attend to no key")
        scores = scores.masked_fill(allowed.logical_not(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def apply_rope(x, positions):
    """Rotate channel pairs (2i, 2i+1) of x (B, H, T, Dh) by pos * 10000^(-2i/Dh); positions (T,) or (B, T)."""
    head_dim = x.size(-1)
    if head_dim % 2 != 0:
        raise ValueError(f"RoPE needs an even head width, not {head_dim}")
    positions = torch.as_tensor(positions)
    if positions.dim() not in (1, 2) or positions.size(-1) != x.size(-2):
        raise ValueError(f"positions must be (T,) or (B, T) with T={x.size(-2)}")
    inv_freq = 10000.0 ** (-torch.arange(head_dim // 2, dtype=x.dtype) * 2 / head_dim)  # (Dh/2,)
    angles = positions.to(x.dtype)[..., None] * inv_freq  # (T, Dh/2) or (B, T, Dh/2)
    if angles.dim() == 3:
        angles = angles.unsqueeze(1)
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]  # (B, H, T, Dh/2) each
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)  # (B, H, T, Dh)


class MultiHead(nn.Module):
    """Projections around attention; RoPE when positions are given (self-attention)."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.wq, self.wk = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.wv, self.wo = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, x, context, mask, positions=None, past=None):
        q = split_heads(self.wq(x), self.n_heads)
        k = split_heads(self.wk(context), self.n_heads)
        v = split_heads(self.wv(context), self.n_heads)
        if positions is not None:
            q, k = apply_rope(q, positions), apply_rope(k, positions)
        if past is not None:
            k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)
        out, _ = attention(q, k, v, mask)
        return self.wo(merge_heads(out)), (k, v)


class FeedForward(nn.Sequential):
    """Linear, ReLU, Linear."""

    def __init__(self, d_model, d_ff):
        super().__init__(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    """Post-norm: x = norm1(x + attn(x)); x = norm2(x + ff(x))."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.attn, self.ff = MultiHead(d_model, n_heads), FeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, mask):
        x = self.norm1(x + self.drop(self.attn(x, x, mask, positions)[0]))
        return self.norm2(x + self.drop(self.ff(x)))


class DecoderLayer(nn.Module):
    """Post-norm: causal self-attention, cross-attention, feed-forward, each followed by its norm."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.self_attn, self.cross_attn = MultiHead(d_model, n_heads), MultiHead(d_model, n_heads)
        self.ff = FeedForward(d_model, d_ff)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, self_mask, memory, cross_mask, past=None):
        attn, present = self.self_attn(x, x, self_mask, positions, past)
        x = self.norm1(x + self.drop(attn))
        x = self.norm2(x + self.drop(self.cross_attn(x, memory, cross_mask)[0]))
        return self.norm3(x + self.drop(self.ff(x))), present


class PostNormSeq2Seq(nn.Module):
    """Encoder-decoder with post-norm layers and interleaved RoPE self-attention."""

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, dropout):
        super().__init__()
        self.src_embed, self.tgt_embed = nn.Embedding(vocab_size, d_model), nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.out = nn.Linear(d_model, vocab_size)

    def encode(self, src, src_mask):
        """src (B, S), src_mask (B, S) True = real -> memory (B, S, D)."""
        real = src_mask.bool()
        length = src.size(1)
        mask = (real[:, None, :] | torch.eye(length, dtype=torch.bool))[:, None]  # (B, 1, S, S): real keys and itself
        x = self.drop(self.src_embed(src))
        for layer in self.encoder:
            x = layer(x, torch.arange(length), mask)
        return x

    def decode(self, tgt, memory, src_mask, cache=None):
        """tgt (B, T) new tokens -> (logits (B, T, V), cache); positions continue after the cache."""
        length = tgt.size(1)
        start = 0 if cache is None else cache[0][0].size(2)
        positions = torch.arange(start, start + length)  # (T,)
        self_mask = torch.arange(start + length)[None, :] <= positions[:, None]  # (T, P+T) causal
        cross_mask = src_mask.bool()[:, None, None, :]  # (B, 1, 1, S)
        x = self.drop(self.tgt_embed(tgt))
        pasts = cache if cache is not None else [None] * len(self.decoder)
        presents = []
        for layer, past in zip(self.decoder, pasts):
            x, present = layer(x, positions, self_mask, memory, cross_mask, past)
            presents.append(present)
        return self.out(x), presents

    def forward(self, src, tgt, src_mask):
        """Teacher-forced logits (B, T, V)."""
        return self.decode(tgt, self.encode(src, src_mask), src_mask)[0]


def build_model(config):
    """The Track A model from the config; unknown keys ignored."""
    if config.get("arch", "seq2seq") != "seq2seq":
        raise ValueError("this Track A submission builds arch='seq2seq' only")
    return PostNormSeq2Seq(int(config["vocab_size"]), int(config["d_model"]), int(config["n_heads"]),
                           int(config["n_layers"]), int(config["d_ff"]), float(config.get("dropout", 0.0)))
