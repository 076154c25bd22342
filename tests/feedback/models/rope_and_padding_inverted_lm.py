# Known-bad for tests/feedback: apply_rope ignores its positions (kv_cache fails because of it) and the model
# reads the padding mask the wrong way round (padding and causality fail because of that); otherwise
# submissions/reference_lm.py.
"""Reference solution, Track B: a decoder-only transformer language model.

Conventions (see the submission contract):
- Boolean masks, True = may attend (attention) or True = real token (model inputs).
- Pre-normalisation blocks: x + attn(norm(x)), then x + ffn(norm(x)).
- RoPE on queries and keys after the head split, half-split pairing: channel i is rotated
  together with channel i + Dh/2, by angle pos * 10000^(-2i/Dh).
- Special IDs come from the config: pad_id 0, bos_id 1, eos_id 2, first ordinary token 3.

Cache structure: {"layers": [{"k": (B, H, P, Dh), "v": (B, H, P, Dh)}, ...one dict per layer],
"key_mask": (B, P) bool}. P is the number of cached positions, so new tokens get positions
P, P+1, ...; keys are stored already rotated; "key_mask" keeps padding from earlier calls masked.
"""
import math

import torch
from torch import nn

TRACK = "lm"


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
    return x.transpose(1, 2).reshape(batch, length, num_heads * head_dim)  # (B, T, D)


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
    positions = torch.arange(x.size(-2), device=x.device)  # (T,): the positions passed in are ignored
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


class SelfAttention(nn.Module):
    """Multi-head causal self-attention with RoPE and a per-layer key/value cache."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, positions, mask, past=None):
        """x (B, T, D), positions (T,), mask (B, 1, T, P+T) -> ((B, T, D), {"k", "v"} for the cache)."""
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, Dh)
        k = split_heads(self.k_proj(x), self.n_heads)  # (B, H, T, Dh)
        v = split_heads(self.v_proj(x), self.n_heads)  # (B, H, T, Dh)
        q = apply_rope(q, positions)  # (B, H, T, Dh)
        k = apply_rope(k, positions)  # (B, H, T, Dh)
        if past is not None:
            k = torch.cat((past["k"], k), dim=2)  # (B, H, P+T, Dh)
            v = torch.cat((past["v"], v), dim=2)  # (B, H, P+T, Dh)
        out, _ = attention(q, k, v, mask)  # (B, H, T, Dh)
        return self.out_proj(merge_heads(out)), {"k": k, "v": v}  # (B, T, D)


class DecoderBlock(nn.Module):
    """Pre-norm decoder block: x + self_attention(norm(x)), then x + feed_forward(norm(x))."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.attn_norm = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, n_heads)
        self.ff_norm = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, mask, past=None):
        """x (B, T, D) -> ((B, T, D), this layer's cache)."""
        attn_out, present = self.attn(self.attn_norm(x), positions, mask, past)  # (B, T, D)
        x = x + self.drop(attn_out)  # (B, T, D)
        x = x + self.drop(self.ff(self.ff_norm(x)))  # (B, T, D)
        return x, present


class DecoderLM(nn.Module):
    """Decoder-only language model: embedding, causal pre-norm blocks with RoPE, final norm, head."""

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(DecoderBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)  # (B, T, D) -> (B, T, V)

    def forward(self, ids, mask=None, cache=None):
        """ids (B, T) int64, mask (B, T) bool True = real token -> (logits (B, T, V), cache)."""
        batch, length = ids.shape
        if mask is None:
            mask = torch.ones_like(ids, dtype=torch.bool)  # (B, T): every token is real
        else:
            mask = ~mask.to(device=ids.device, dtype=torch.bool)  # (B, T): read the wrong way round
        if mask.shape != ids.shape:
            raise ValueError(f"mask must have the shape of ids {tuple(ids.shape)}, got {tuple(mask.shape)}")
        if cache is None:
            past_mask = mask.new_zeros((batch, 0))  # (B, 0): nothing cached yet
            past_layers = [None] * len(self.blocks)
        else:
            past_mask, past_layers = cache["key_mask"], cache["layers"]  # (B, P), one dict per layer
        past = past_mask.size(1)
        key_mask = torch.cat((past_mask, mask), dim=1)  # (B, P+T): True = real key
        attn_mask = causal_padding_mask(key_mask, length)  # (B, 1, T, P+T)
        positions = torch.arange(past, past + length, device=ids.device)  # (T,): continue after the cache
        x = self.drop(self.embed(ids))  # (B, T, D)
        layers = []
        for block, layer_past in zip(self.blocks, past_layers):
            x, present = block(x, positions, attn_mask, layer_past)  # (B, T, D)
            layers.append(present)
        logits = self.head(self.norm(x))  # (B, T, V)
        return logits, {"layers": layers, "key_mask": key_mask}


def build_model(config):
    """Build the Track B model from the config alone; unknown keys are ignored."""
    arch = config.get("arch", "decoder")
    if arch != "decoder":
        raise ValueError(f"this is a Track B submission: it builds arch='decoder' only, not arch={arch!r}")
    d_model, n_heads = int(config["d_model"]), int(config["n_heads"])
    if n_heads <= 0 or d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    # max_len needs no table here: RoPE computes its angles from the positions themselves.
    return DecoderLM(
        vocab_size=int(config["vocab_size"]),
        d_model=d_model,
        n_heads=n_heads,
        n_layers=int(config["n_layers"]),
        d_ff=int(config["d_ff"]),
        dropout=float(config.get("dropout", 0.0)),
    )
