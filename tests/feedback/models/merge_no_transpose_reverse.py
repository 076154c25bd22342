# Known-bad for tests/feedback: merge_heads reshapes back without transposing first; otherwise
# submissions/reference_reverse.py.
"""Reference solution, Track A: an encoder-decoder transformer that reverses sequences.

Conventions (see the submission contract):
- Boolean masks, True = may attend (attention) or True = real token (src_mask).
- Pre-normalisation blocks: x + attn(norm(x)), [x + cross_attn(norm(x), memory)], x + ffn(norm(x)).
- RoPE on queries and keys after the head split, half-split pairing: channel i is rotated
  together with channel i + Dh/2, by angle pos * 10000^(-2i/Dh). It is used in the encoder and
  decoder self-attention; cross-attention compares decoder and source positions, so it takes no
  RoPE (the encoder output already carries the source positions).
- Special IDs come from the config: pad_id 0, bos_id 1, eos_id 2, first ordinary token 3.

Cache structure (decoder self-attention only): a list with one dict per decoder layer,
{"k": (B, H, P, Dh), "v": (B, H, P, Dh)}. P = cache[0]["k"].size(2) is the number of decoded
positions so far, so new tokens get positions P, P+1, ...; keys are stored already rotated.
Cross-attention keys and values are recomputed from `memory` at every call.
"""
import math

import torch
from torch import nn

TRACK = "reverse"


def split_heads(x, num_heads):
    """Split (B, T, D) into (B, H, T, D/H): head h holds channels h*Dh .. (h+1)*Dh - 1."""
    batch, length, width = x.shape
    if num_heads <= 0 or width % num_heads != 0:
        raise ValueError(f"model width {width} is not divisible by num_heads={num_heads}")
    head_dim = width // num_heads
    return x.reshape(batch, length, num_heads, head_dim).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x):
    """Inverse of split_heads: (B, H, T, Dh) -> (B, T, H*Dh)."""
    batch, num_heads, length, head_dim = x.shape
    return x.reshape(batch, length, num_heads * head_dim)  # (B, T, D): no transpose back, positions mix


def attention(q, k, v, mask=None):
    """Scaled dot-product attention over the key axis; returns (out, weights), mask True = may attend."""
    head_dim = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, H, Tq, Tk)
    if mask is not None:
        allowed = torch.as_tensor(mask, dtype=torch.bool, device=scores.device)
        allowed = torch.broadcast_to(allowed, scores.shape)  # (B, H, Tq, Tk)
        if not bool(allowed.any(dim=-1).all()):
            raise ValueError("attention mask leaves a query row with no allowed key")
        scores = scores.masked_fill(~allowed, float("-inf"))  # exp(-inf) = 0: exact zero weights
    weights = torch.softmax(scores, dim=-1)  # (B, H, Tq, Tk), each query row sums to 1
    out = weights @ v  # (B, H, Tq, Dh)
    return out, weights


def apply_rope(x, positions):
    """Rotate channel pairs (i, i + Dh/2) of x (B, H, T, Dh) by angle pos * 10000^(-2i/Dh)."""
    head_dim = x.size(-1)
    if head_dim % 2 != 0:
        raise ValueError(f"RoPE needs an even head width, got Dh={head_dim}")
    positions = torch.as_tensor(positions, device=x.device)
    if positions.dim() not in (1, 2) or positions.size(-1) != x.size(-2):
        raise ValueError(f"positions must be (T,) or (B, T) with T={x.size(-2)}, got {tuple(positions.shape)}")
    half = head_dim // 2
    exponent = torch.arange(half, dtype=x.dtype, device=x.device) * (2.0 / head_dim)  # (Dh/2,) = 2i/Dh
    inv_freq = torch.pow(10000.0, -exponent)  # (Dh/2,)
    angles = positions.to(x.dtype)[..., None] * inv_freq  # (T, Dh/2) or (B, T, Dh/2)
    if angles.dim() == 3:
        angles = angles[:, None]  # (B, 1, T, Dh/2): the same angles for every head
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :half], x[..., half:]  # (B, H, T, Dh/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (B, H, T, Dh)


def causal_padding_mask(key_mask, num_queries):
    """(B, 1, Tq, Tk) bool: causal and real keys only; every query may also see itself."""
    total = key_mask.size(1)
    past = total - num_queries  # the queries are the last num_queries positions
    query_pos = torch.arange(past, total, device=key_mask.device)[:, None]  # (Tq, 1)
    key_pos = torch.arange(total, device=key_mask.device)[None, :]  # (1, Tk)
    causal = key_pos <= query_pos  # (Tq, Tk)
    itself = key_pos == query_pos  # (Tq, Tk): a padded query keeps one allowed key, so nothing raises
    allowed = (causal & key_mask[:, None, :]) | itself  # (B, Tq, Tk)
    return allowed[:, None]  # (B, 1, Tq, Tk): the same for every head


def encoder_mask(src_mask):
    """(B, 1, S, S) bool: every source query sees the real source tokens, and itself."""
    itself = torch.eye(src_mask.size(1), dtype=torch.bool, device=src_mask.device)  # (S, S)
    return (src_mask[:, None, :] | itself)[:, None]  # (B, 1, S, S)


class AttentionLayer(nn.Module):
    """Multi-head attention: project, split heads, RoPE (optional), attend, merge, project."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, context, mask, positions=None, past=None):
        """Queries from x (B, T, D), keys/values from context (B, S, D) -> ((B, T, D), {"k", "v"})."""
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, Dh)
        k = split_heads(self.k_proj(context), self.n_heads)  # (B, H, S, Dh)
        v = split_heads(self.v_proj(context), self.n_heads)  # (B, H, S, Dh)
        if positions is not None:  # self-attention: x and context are the same tokens
            q = apply_rope(q, positions)  # (B, H, T, Dh)
            k = apply_rope(k, positions)  # (B, H, T, Dh)
        if past is not None:
            k = torch.cat((past["k"], k), dim=2)  # (B, H, P+T, Dh)
            v = torch.cat((past["v"], v), dim=2)  # (B, H, P+T, Dh)
        out, _ = attention(q, k, v, mask)  # (B, H, T, Dh)
        return self.out_proj(merge_heads(out)), {"k": k, "v": v}  # (B, T, D)


def feed_forward(d_model, d_ff):
    """Position-wise feed-forward network (B, T, D) -> (B, T, D)."""
    return nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))


class EncoderBlock(nn.Module):
    """Pre-norm encoder block: bidirectional self-attention over real tokens, then feed-forward."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.attn_norm = nn.LayerNorm(d_model)
        self.attn = AttentionLayer(d_model, n_heads)
        self.ff_norm = nn.LayerNorm(d_model)
        self.ff = feed_forward(d_model, d_ff)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, mask):
        """x (B, S, D), positions (S,), mask (B, 1, S, S) -> (B, S, D)."""
        h = self.attn_norm(x)  # (B, S, D)
        attn_out, _ = self.attn(h, h, mask, positions=positions)  # (B, S, D)
        x = x + self.drop(attn_out)  # (B, S, D)
        x = x + self.drop(self.ff(self.ff_norm(x)))  # (B, S, D)
        return x


class DecoderBlock(nn.Module):
    """Pre-norm decoder block: causal self-attention, cross-attention to memory, feed-forward."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.self_norm = nn.LayerNorm(d_model)
        self.self_attn = AttentionLayer(d_model, n_heads)
        self.cross_norm = nn.LayerNorm(d_model)
        self.cross_attn = AttentionLayer(d_model, n_heads)
        self.ff_norm = nn.LayerNorm(d_model)
        self.ff = feed_forward(d_model, d_ff)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, self_mask, memory, cross_mask, past=None):
        """x (B, T, D), memory (B, S, D) -> ((B, T, D), this layer's self-attention cache)."""
        h = self.self_norm(x)  # (B, T, D)
        attn_out, present = self.self_attn(h, h, self_mask, positions=positions, past=past)  # (B, T, D)
        x = x + self.drop(attn_out)  # (B, T, D)
        cross_out, _ = self.cross_attn(self.cross_norm(x), memory, cross_mask)  # (B, T, D)
        x = x + self.drop(cross_out)  # (B, T, D)
        x = x + self.drop(self.ff(self.ff_norm(x)))  # (B, T, D)
        return x, present


class Seq2Seq(nn.Module):
    """Encoder-decoder transformer with a shared token embedding and RoPE self-attention."""

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)  # shared by source and target tokens
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.encoder_norm = nn.LayerNorm(d_model)
        self.decoder = nn.ModuleList(DecoderBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)  # (B, T, D) -> (B, T, V)

    def encode(self, src, src_mask):
        """src (B, S) int64, src_mask (B, S) bool True = real token -> memory (B, S, D)."""
        src_mask = src_mask.to(device=src.device, dtype=torch.bool)  # (B, S)
        positions = torch.arange(src.size(1), device=src.device)  # (S,)
        mask = encoder_mask(src_mask)  # (B, 1, S, S)
        x = self.drop(self.embed(src))  # (B, S, D)
        for block in self.encoder:
            x = block(x, positions, mask)  # (B, S, D)
        return self.encoder_norm(x)  # (B, S, D)

    def decode(self, tgt, memory, src_mask, cache=None):
        """tgt (B, T) new tokens, memory (B, S, D) -> (logits (B, T, V), cache); positions continue the cache."""
        batch, length = tgt.shape
        past_layers = [None] * len(self.decoder) if cache is None else cache
        past = 0 if cache is None else cache[0]["k"].size(2)  # number of cached positions P
        positions = torch.arange(past, past + length, device=tgt.device)  # (T,)
        key_mask = torch.ones(batch, past + length, dtype=torch.bool, device=tgt.device)  # (B, P+T)
        self_mask = causal_padding_mask(key_mask, length)  # (B, 1, T, P+T)
        cross_mask = src_mask.to(device=tgt.device, dtype=torch.bool)[:, None, None, :]  # (B, 1, 1, S)
        x = self.drop(self.embed(tgt))  # (B, T, D)
        layers = []
        for block, layer_past in zip(self.decoder, past_layers):
            x, present = block(x, positions, self_mask, memory, cross_mask, layer_past)  # (B, T, D)
            layers.append(present)
        logits = self.head(self.decoder_norm(x))  # (B, T, V)
        return logits, layers

    def forward(self, src, tgt, src_mask):
        """Teacher-forced logits (B, T, V) for decoder input tgt (B, T)."""
        return self.decode(tgt, self.encode(src, src_mask), src_mask)[0]


def build_model(config):
    """Build the Track A model from the config alone; unknown keys are ignored."""
    arch = config.get("arch", "seq2seq")
    if arch != "seq2seq":
        raise ValueError(f"this is a Track A submission: it builds arch='seq2seq' only, not arch={arch!r}")
    d_model, n_heads = int(config["d_model"]), int(config["n_heads"])
    if n_heads <= 0 or d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    # max_len needs no table here: RoPE computes its angles from the positions themselves.
    return Seq2Seq(
        vocab_size=int(config["vocab_size"]),
        d_model=d_model,
        n_heads=n_heads,
        n_layers=int(config["n_layers"]),
        d_ff=int(config["d_ff"]),
        dropout=float(config.get("dropout", 0.0)),
    )
