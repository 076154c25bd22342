"""Capstone submission template: replace every `raise NotImplementedError` with your own code.

You hand in this one file. The grader imports it, calls the functions and the model below with
inputs of its own, and compares what comes back with its own references. A few rules:

- Import only the Python standard library and `torch`.
- Build attention yourself. PyTorch's ready-made attention functions and transformer or
  multi-head attention layers are not allowed; the grader searches your source text for them,
  comments and strings included, so do not even mention them.
- Names used below: B batch size, T decoder (or model input) length, S source length,
  D = d_model, H = n_heads, Dh = D // H (the head width), V = vocab_size.
- Boolean masks only, and True always means "yes": True = this key may be attended to, or
  True = this position holds a real token (not padding).
- Special IDs come from the config: pad_id = 0, bos_id = 1, eos_id = 2; ordinary tokens start at 3.
- The grader switches your model between `.train()` and `.eval()`, and runs its numerical checks
  after `.double()` with float64 as the default dtype. So: create tensors inside `forward` with the
  device and dtype of your inputs or parameters, use nothing random in eval mode (same input, same
  output), and keep everything the model needs in parameters or persistent buffers, because a saved
  state dict is loaded into a freshly built model (`strict=True`) in another process and under
  another random seed.
"""
import math

import torch
from torch import nn

# The track you submit: "lm" (Track B, a decoder-only language model)
# or "reverse" (Track A, an encoder-decoder model that reverses sequences).
TRACK = "lm"


def split_heads(x, num_heads):
    """Split the model width into heads: (B, T, D) -> (B, H, T, Dh).

    Head h must hold channels h*Dh up to (h+1)*Dh - 1 of every position, that is
    out[b, h, t, :] == x[b, t, h*Dh:(h+1)*Dh], with Dh = D // num_heads.
    A reshape alone gives the right shape but the wrong arrangement: think about which axis
    has to move. Raise ValueError when D is not divisible by num_heads.
    """
    raise NotImplementedError("write split_heads")


def merge_heads(x):
    """Undo split_heads: (B, H, T, Dh) -> (B, T, H*Dh).

    merge_heads(split_heads(x, H)) must give back exactly x (bit for bit, no tolerance).
    """
    raise NotImplementedError("write merge_heads")


def attention(q, k, v, mask=None):
    """Scaled dot-product attention; return the pair (out, weights).

    q is (B, H, Tq, Dh); k and v are (B, H, Tk, Dh). mask is None (everything allowed) or a bool
    tensor that broadcasts to (B, H, Tq, Tk), True = this query may attend to this key
    (for example a (Tq, Tk) causal mask, or a (B, 1, 1, Tk) padding mask).

    weights (B, H, Tq, Tk): softmax over the key axis of q @ k^T / sqrt(Dh), with disallowed
    keys set to -inf before the softmax, so every row sums to 1 and every disallowed weight is
    exactly 0. out (B, H, Tq, Dh) = weights @ v.
    If some query row has no allowed key at all, the softmax is undefined: raise ValueError.
    The grader compares your result with PyTorch's own attention in float64 (atol 1e-10).
    """
    raise NotImplementedError("write attention")


def apply_rope(x, positions):
    """Rotary position embedding: rotate pairs of channels by a position-dependent angle.

    x is (B, H, T, Dh) (queries or keys, after split_heads; never values). positions is an int64
    tensor of absolute positions, shape (T,) (the same for the whole batch) or (B, T).
    Pair i (i = 0 .. Dh/2 - 1) is rotated by the angle pos * 10000 ** (-2i / Dh). You choose the
    pairing, and should say which in a comment: interleaved, channels (2i, 2i+1), or half-split,
    channels (i, i + Dh/2). Return a tensor of the same shape as x.
    A true rotation keeps every vector's length, and the dot product of a query at position m
    with a key at position n then depends only on m - n. Raise ValueError when Dh is odd.
    """
    raise NotImplementedError("write apply_rope")


class DecoderLM(nn.Module):
    """Track B (arch="decoder"): a decoder-only transformer that predicts the next token."""

    def __init__(self, config):
        """Create the layers: token embedding, n_layers pre-norm causal blocks, final norm, output projection.

        A pre-norm block computes x = x + self_attention(norm(x)), then x = x + feed_forward(norm(x)).
        Use config["dropout"] for nn.Dropout layers (the grader turns them off with .eval()).
        Your attention layers must call the module-level split_heads, attention and apply_rope.
        """
        super().__init__()
        raise NotImplementedError("write DecoderLM.__init__")

    def forward(self, ids, mask=None, cache=None):
        """ids (B, T) int64, mask (B, T) bool (True = real token) or None -> (logits (B, T, V), cache).

        Position t may attend only to positions <= t (causal) that are real tokens (padding).
        Padding can sit anywhere, including on the left. Outputs at padded positions can be
        anything, but must not raise: a padded query still needs one allowed key (letting every
        query attend to itself is enough), or your attention will raise ValueError.

        The cache makes generation cheap. On the first call cache is None; afterwards the grader
        passes back whatever your previous call returned, and ids (and mask) hold only the new
        tokens, one or several. Keep the earlier keys and values (and anything else you need, such
        as which earlier positions were padding), and give the new tokens the positions that
        follow the cached ones, not positions starting again at 0. With dropout off, cached
        logits must equal the logits of running the whole sequence at once.
        The cache may be any structure of tensors, lists, tuples and dicts.
        """
        raise NotImplementedError("write DecoderLM.forward")


class Seq2Seq(nn.Module):
    """Track A (arch="seq2seq"): an encoder-decoder transformer for sequence reversal."""

    def __init__(self, config):
        """Create the layers: embeddings, encoder blocks, decoder blocks, final norms, output projection.

        Encoder blocks: bidirectional self-attention over the real source tokens, then feed-forward.
        Decoder blocks: causal self-attention, cross-attention (queries from the decoder, keys and
        values from the encoder output), then feed-forward; all pre-norm with residuals.
        Use config["dropout"] for nn.Dropout layers. Call the module-level helpers.
        """
        super().__init__()
        raise NotImplementedError("write Seq2Seq.__init__")

    def encode(self, src, src_mask):
        """src (B, S) int64, src_mask (B, S) bool (True = real token) -> memory (B, S, D).

        Real source tokens must never read padding: changing the IDs at padded positions must not
        change the memory at real positions.
        """
        raise NotImplementedError("write Seq2Seq.encode")

    def decode(self, tgt, memory, src_mask, cache=None):
        """tgt (B, T) int64, memory (B, S, D), src_mask (B, S) -> (logits (B, T, V), cache).

        Causal self-attention over tgt, and cross-attention to the real source tokens only (mask
        the keys with src_mask). With a cache from an earlier call, tgt holds only the new tokens
        and their positions continue where the cache ends. Return a cache on every call, the
        first one included; cached logits must equal decoding the whole prefix at once.
        """
        raise NotImplementedError("write Seq2Seq.decode")

    def forward(self, src, tgt, src_mask):
        """Teacher forcing: logits (B, T, V), the same as decode(tgt, encode(src, src_mask), src_mask)[0]."""
        raise NotImplementedError("write Seq2Seq.forward")


def build_model(config):
    """Build your model from the config dict alone and return it (an nn.Module).

    The grader passes arch ("decoder" for Track B, "seq2seq" for Track A), vocab_size, d_model,
    n_heads, n_layers, d_ff, max_len, dropout, pad_id, bos_id and eos_id. Ignore keys you do not
    know. Building only your own track's arch is fine: raise ValueError with a clear message for
    the other one. d_model must be divisible by n_heads.
    """
    raise NotImplementedError("write build_model")
