"""Known-bad submissions: each is a reference with one realistic bug, made by one substitution."""
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Bug:
    """One realistic bug: replace `old` (which occurs exactly once in `base`) by `new`."""

    name: str  # file stem, e.g. "split_no_transpose"
    base: str  # "reference_lm.py" or "reference_reverse.py"
    old: str
    new: str
    fails: frozenset  # check ids this bug must fail; every other check must pass
    about: str  # one sentence a student would understand


KNOWN_BAD: tuple[Bug, ...] = (
    Bug(
        name="split_no_transpose",
        base="reference_reverse.py",
        old="    return x.reshape(batch, length, num_heads, head_dim).transpose(1, 2)  # (B, H, T, Dh)\n",
        new="    return x.reshape(batch, num_heads, length, head_dim)  # (B, H, T, Dh)\n",
        fails=frozenset({"split_heads", "causality", "padding", "kv_cache", "training", "evaluation"}),
        about="split_heads reshapes straight to (B, H, T, Dh) without a transpose, so each 'head' mixes "
        "channels of several positions: the shape is right, the arrangement is not.",
    ),
    Bug(
        name="softmax_query_axis",
        base="reference_lm.py",
        old="    weights = torch.softmax(scores, dim=-1)  # (B, H, Tq, Tk), each query row sums to 1\n",
        new="    weights = torch.softmax(scores, dim=-2)  # (B, H, Tq, Tk)\n",
        fails=frozenset({"attention_sdpa", "causality", "padding", "kv_cache", "training", "evaluation"}),
        about="The softmax normalises over the query axis instead of the key axis, so a query's weights "
        "do not sum to 1 and depend on the other (later) queries.",
    ),
    Bug(
        name="no_sqrt_scale",
        base="reference_reverse.py",
        old="    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, H, Tq, Tk)\n",
        new="    scores = q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)\n",
        fails=frozenset({"attention_sdpa"}),
        about="The attention scores are not divided by sqrt(Dh), so the softmax is sharper than specified "
        "and the weights differ from the reference attention.",
    ),
    Bug(
        name="causal_leak",
        base="reference_reverse.py",
        old="    causal = key_pos <= query_pos  # (Tq, Tk)\n",
        new="    causal = key_pos <= query_pos + 1  # (Tq, Tk)\n",
        fails=frozenset({"causality", "kv_cache", "training", "evaluation"}),
        about="The causal mask is off by one and lets every decoder position read the next token, "
        "the one it is supposed to predict.",
    ),
    Bug(
        name="padding_mask_inverted",
        base="reference_lm.py",
        old="            mask = mask.to(device=ids.device, dtype=torch.bool)  # (B, T)\n",
        new="            mask = ~mask.to(device=ids.device, dtype=torch.bool)  # (B, T)\n",
        fails=frozenset({"padding", "causality"}),
        about="The model reads the padding mask the wrong way round (True = padding), so when a mask is "
        "given, real tokens attend to the padding and ignore each other.",
    ),
    Bug(
        name="rope_restart_with_cache",
        base="reference_lm.py",
        old="        positions = torch.arange(past, past + length, device=ids.device)  # (T,): continue after the cache\n",
        new="        positions = torch.arange(length, device=ids.device)  # (T,)\n",
        fails=frozenset({"kv_cache", "evaluation"}),
        about="With a cache, the new tokens' RoPE positions restart at 0 instead of continuing where the "
        "cache ends, so cached decoding differs from running the full prefix.",
    ),
    Bug(
        name="detached_key",
        base="reference_lm.py",
        old="        k = split_heads(self.k_proj(x), self.n_heads)  # (B, H, T, Dh)\n",
        new="        k = split_heads(self.k_proj(x).detach(), self.n_heads)  # (B, H, T, Dh)\n",
        fails=frozenset({"gradient_path", "training", "evaluation"}),
        about="The key projection's output is detached, so the key weights never receive a gradient and "
        "never learn; the gradient returned in training is not the loss's (the judge's finite difference "
        "sees the key path the detach hides), in the training run and in the cyclic task's.",
    ),
    Bug(
        name="random_buffer",
        base="reference_lm.py",
        old="        self.head = nn.Linear(d_model, vocab_size)  # (B, T, D) -> (B, T, V)\n",
        new=(
            "        self.head = nn.Linear(d_model, vocab_size)  # (B, T, D) -> (B, T, V)\n"
            "        del self.head.weight  # a fixed random read-out matrix, kept as a buffer\n"
            "        self.head.register_buffer(\n"
            '            "weight", torch.randn(vocab_size, d_model) / math.sqrt(d_model), persistent=False\n'
            "        )\n"
        ),
        fails=frozenset({"checkpoint_reload"}),
        about="The output projection is a random matrix registered with persistent=False, so it is not in "
        "the state dict and a model rebuilt under another seed draws a different one.",
    ),
    Bug(
        name="sdpa_shortcut",
        base="reference_reverse.py",
        old="    out = weights @ v  # (B, H, Tq, Dh)\n",
        new="    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, Tq, Dh)\n",
        fails=frozenset({"no_shortcuts"}),
        about="The attention output comes from PyTorch's built-in fused attention instead of your own "
        "weights @ v, which the assignment forbids even though the numbers agree.",
    ),
    Bug(
        name="rope_not_rotation",
        base="reference_reverse.py",
        old="    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (B, H, T, Dh)\n",
        new="    return torch.cat((x1 * cos - x2 * sin, x2 * cos - x1 * sin), dim=-1)  # (B, H, T, Dh)\n",
        fails=frozenset({"rope"}),
        about="A sign error turns RoPE's 2x2 rotation into a map that is not a rotation, so vector norms "
        "change and query-key dot products no longer depend only on the relative position.",
    ),
)


def materialize(dest: Path) -> list[Path]:
    """Write every known-bad submission into dest and return their paths."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for bug in KNOWN_BAD:
        source = (HERE / bug.base).read_text(encoding="utf-8")
        count = source.count(bug.old)
        if count != 1:
            raise ValueError(f"{bug.name}: `old` occurs {count} times in {bug.base}, expected exactly once")
        path = dest / f"{bug.name}.py"
        path.write_text(source.replace(bug.old, bug.new), encoding="utf-8")
        paths.append(path)
    return paths
