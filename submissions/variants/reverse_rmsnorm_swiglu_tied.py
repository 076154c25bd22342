"""Correct variant, Track A: RMSNorm, SwiGLU, fused projections, tied embeddings, complex half-split RoPE.

Same contract as submissions/reference_reverse.py, written differently:
- pre-RMSNorm blocks with a SwiGLU feed-forward;
- self-attention uses one fused qkv projection, cross-attention a query projection and a fused kv one;
- one embedding matrix serves the source, the target and (transposed) the output layer;
- RoPE pairs channel i with i + Dh/2 and rotates the pair as the complex number x_i + j x_{i+Dh/2};
- the decoder passes per-row positions (B, T) to apply_rope;
- the cache is a dict {"k": [per layer (B, H, P, Dh)], "v": [...]}.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

TRACK = "reverse"


def split_heads(x, num_heads):
    """(B, T, D) -> (B, H, T, D/H)."""
    batch, length, width = x.shape
    if num_heads < 1 or width % num_heads:
        raise ValueError(f"{width} channels cannot be split into {num_heads} heads")
    return x.reshape(batch, length, num_heads, width // num_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    """(B, H, T, Dh) -> (B, T, H*Dh)."""
    return x.permute(0, 2, 1, 3).flatten(2)


def attention(q, k, v, mask=None):
    """Scaled dot-product attention, mask True = may attend; (out, weights)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale  # (B, H, Tq, Tk)
    if mask is not None:
        allowed = torch.broadcast_to(torch.as_tensor(mask, dtype=torch.bool), scores.shape)
        if not bool(allowed.any(dim=-1).all()):
            raise ValueError("a query row has every key masked")
        scores = scores.masked_fill(~allowed, -math.inf)
    weights = F.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights


def apply_rope(x, positions):
    """Rotate (x_i, x_{i+Dh/2}) as the complex number x_i + j x_{i+Dh/2} by angle pos * 10000^(-2i/Dh)."""
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head width {head_dim} is odd")
    positions = torch.as_tensor(positions)
    if positions.dim() not in (1, 2) or positions.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions must be (T,) or (B, T), T={x.shape[-2]}")
    half = head_dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=x.dtype) * 2 / head_dim)  # (Dh/2,)
    angles = positions.to(x.dtype)[..., None] * freqs  # (T, Dh/2) or (B, T, Dh/2)
    if angles.dim() == 3:
        angles = angles[:, None]
    turned = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones_like(angles), angles)
    return torch.cat((turned.real, turned.imag), dim=-1)  # (B, H, T, Dh)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation with a learned gain."""

    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return self.gain * x / torch.sqrt(x.square().mean(-1, keepdim=True) + self.eps)


class SwiGLU(nn.Module):
    """Fused gate and up projection, SiLU gating, down projection."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate_up = nn.Linear(d_model, 2 * d_ff)
        self.down = nn.Linear(d_ff, d_model)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class SelfAttention(nn.Module):
    """Fused qkv self-attention with RoPE and an optional cache."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x, positions, mask, past_k=None, past_v=None):
        q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))
        q, k = apply_rope(q, positions), apply_rope(k, positions)
        if past_k is not None:
            k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        out, _ = attention(q, k, v, mask)
        return self.out(merge_heads(out)), k, v


class CrossAttention(nn.Module):
    """Queries from the decoder, fused keys and values from memory; no RoPE."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x, memory, mask):
        k, v = (split_heads(t, self.n_heads) for t in self.kv(memory).chunk(2, dim=-1))
        out, _ = attention(split_heads(self.q(x), self.n_heads), k, v, mask)
        return self.out(merge_heads(out))


class Encoder(nn.Module):
    """Pre-RMSNorm encoder layer."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.n1, self.n2 = RMSNorm(d_model), RMSNorm(d_model)
        self.attn, self.ff = SelfAttention(d_model, n_heads), SwiGLU(d_model, d_ff)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, mask):
        x = x + self.drop(self.attn(self.n1(x), positions, mask)[0])
        return x + self.drop(self.ff(self.n2(x)))


class Decoder(nn.Module):
    """Pre-RMSNorm decoder layer: self-attention, cross-attention, SwiGLU."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.n1, self.n2, self.n3 = RMSNorm(d_model), RMSNorm(d_model), RMSNorm(d_model)
        self.attn, self.cross = SelfAttention(d_model, n_heads), CrossAttention(d_model, n_heads)
        self.ff = SwiGLU(d_model, d_ff)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, self_mask, memory, cross_mask, past_k=None, past_v=None):
        attn, k, v = self.attn(self.n1(x), positions, self_mask, past_k, past_v)
        x = x + self.drop(attn)
        x = x + self.drop(self.cross(self.n2(x), memory, cross_mask))
        return x + self.drop(self.ff(self.n3(x))), k, v


class TiedSeq2Seq(nn.Module):
    """Encoder-decoder whose one embedding matrix is also the output layer."""

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embed.weight, std=d_model ** -0.5)  # tied: keep the initial logits near unit scale
        self.drop = nn.Dropout(dropout)
        self.encoders = nn.ModuleList(Encoder(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoders = nn.ModuleList(Decoder(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.enc_norm, self.dec_norm = RMSNorm(d_model), RMSNorm(d_model)

    def encode(self, src, src_mask):
        """src (B, S), src_mask (B, S) True = real -> memory (B, S, D)."""
        real = src_mask.bool()
        eye = torch.eye(src.shape[1], dtype=torch.bool)
        mask = (real[:, None, :] | eye)[:, None]  # (B, 1, S, S)
        x = self.drop(self.embed(src))
        for layer in self.encoders:
            x = layer(x, torch.arange(src.shape[1]), mask)
        return self.enc_norm(x)

    def decode(self, tgt, memory, src_mask, cache=None):
        """tgt (B, T) new tokens -> (logits (B, T, V), cache)."""
        batch, length = tgt.shape
        cache = cache or {"k": [None] * len(self.decoders), "v": [None] * len(self.decoders)}
        start = 0 if cache["k"][0] is None else cache["k"][0].shape[2]
        positions = (start + torch.arange(length)).repeat(batch, 1)  # (B, T)
        self_mask = torch.arange(start + length)[None, None, :] <= positions[:, :, None]  # (B, T, P+T)
        cross_mask = src_mask.bool()[:, None, None, :]  # (B, 1, 1, S)
        x = self.drop(self.embed(tgt))
        new = {"k": [], "v": []}
        for layer, past_k, past_v in zip(self.decoders, cache["k"], cache["v"]):
            x, k, v = layer(x, positions, self_mask[:, None], memory, cross_mask, past_k, past_v)
            new["k"].append(k)
            new["v"].append(v)
        return self.dec_norm(x) @ self.embed.weight.T, new

    def forward(self, src, tgt, src_mask):
        """Teacher-forced logits (B, T, V)."""
        return self.decode(tgt, self.encode(src, src_mask), src_mask)[0]


def build_model(config):
    """The Track A model from the config; unknown keys ignored."""
    if config.get("arch", "seq2seq") != "seq2seq":
        raise ValueError("this Track A submission builds arch='seq2seq' only")
    return TiedSeq2Seq(int(config["vocab_size"]), int(config["d_model"]), int(config["n_heads"]),
                       int(config["n_layers"]), int(config["d_ff"]), float(config.get("dropout", 0.0)))
