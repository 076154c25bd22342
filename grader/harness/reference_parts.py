"""The judge's own contract functions, put in place of a submission's for a root-cause diagnosis (grader/rootcause.py).

A stage whose params name `substitute` runs with these set as the submission module's attributes after its import:
a model that calls the module-level function then runs the correct one. Diagnosis only: what a substituted stage
returns never changes a verdict, so this runs in the sandbox like every probe. Each follows docs/contract.md
(RoPE: the half-split pairing, which the contract allows; the model-level checks do not depend on the pairing).
"""
import math

import torch


def split_heads(x, num_heads):
    """(B, T, D) -> (B, H, T, D/H): head h holds channels h*Dh .. (h+1)*Dh - 1."""
    batch, length, width = x.shape
    if num_heads <= 0 or width % num_heads != 0:
        raise ValueError(f"model width {width} is not divisible by num_heads={num_heads}")
    return x.reshape(batch, length, num_heads, width // num_heads).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x):
    """(B, H, T, Dh) -> (B, T, H*Dh), the inverse of split_heads."""
    batch, num_heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, num_heads * head_dim)  # (B, T, D)


def attention(q, k, v, mask=None):
    """softmax over keys of q·kᵀ/√Dh, forbidden keys at −inf (mask True = may attend): (out, weights)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    if mask is not None:
        allowed = torch.broadcast_to(torch.as_tensor(mask, dtype=torch.bool, device=scores.device), scores.shape)
        if not bool(allowed.any(dim=-1).all()):
            raise ValueError("attention mask leaves a query row with no allowed key")
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, H, Tq, Tk)
    return weights @ v, weights  # (B, H, Tq, Dh), (B, H, Tq, Tk)


def apply_rope(x, positions):
    """Turn channel pairs (i, i + Dh/2) of x (B, H, T, Dh) by pos · 10000^(−2i/Dh); positions (T,) or (B, T)."""
    head_dim = x.size(-1)
    if head_dim % 2 != 0:
        raise ValueError(f"RoPE needs an even head width, got Dh={head_dim}")
    half = head_dim // 2
    inv_freq = torch.pow(10000.0, -torch.arange(half, dtype=x.dtype, device=x.device) * (2.0 / head_dim))  # (Dh/2,)
    angles = torch.as_tensor(positions, device=x.device).to(x.dtype)[..., None] * inv_freq  # (T, Dh/2) or (B, T, Dh/2)
    if angles.dim() == 3:
        angles = angles[:, None]  # (B, 1, T, Dh/2): every head alike
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :half], x[..., half:]  # (B, H, T, Dh/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (B, H, T, Dh)


PARTS = {"split_heads": split_heads, "merge_heads": merge_heads, "attention": attention, "apply_rope": apply_rope}


def substitute(module, names) -> None:
    """Set the named functions of the submission's module to the judge's (names it does not know are ignored)."""
    for name in names if isinstance(names, (list, tuple)) else ():
        if isinstance(name, str) and name in PARTS:
            setattr(module, name, PARTS[name])
