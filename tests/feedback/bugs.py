"""The known-bad submissions of the root-cause tests, made at test time: a reference with one bug (or two) each.

Each entry is the track, a header saying what is wrong, and (old, new) substitutions whose old text occurs exactly
once in submissions/reference_<track>.py, so a change to a reference reaches every known-bad built from it.
"""
from tests.support.grading import REFERENCES

BUGS = {
    'merge_no_transpose_lm': ('lm',
        ('# Known-bad for tests/feedback: merge_heads reshapes back without transposing first; otherwise\n'
         '# submissions/reference_lm.py.\n'), [
        ('    return x.transpose(1, 2).reshape(batch, length, num_heads * head_dim)  # (B, T, D)\n',
         '    return x.reshape(batch, length, num_heads * head_dim)  # (B, T, D): no transpose back, positions mix\n'),
    ]),
    'merge_no_transpose_reverse': ('reverse',
        ('# Known-bad for tests/feedback: merge_heads reshapes back without transposing first; otherwise\n'
         '# submissions/reference_reverse.py.\n'), [
        ('    return x.transpose(1, 2).reshape(batch, length, num_heads * head_dim)  # (B, T, D)\n',
         '    return x.reshape(batch, length, num_heads * head_dim)  # (B, T, D): no transpose back, positions mix\n'),
    ]),
    'rope_and_padding_inverted_lm': ('lm',
        ('# Known-bad for tests/feedback: apply_rope ignores its positions (kv_cache fails because of it) and the model\n'
         '# reads the padding mask the wrong way round (padding and causality fail because of that); otherwise\n'
         '# submissions/reference_lm.py.\n'), [
        ('    positions = torch.as_tensor(positions, device=x.device)\n',
         '    positions = torch.arange(x.size(-2), device=x.device)  # (T,): the positions passed in are ignored\n'),
        ('            mask = mask.to(device=ids.device, dtype=torch.bool)  # (B, T)\n',
         '            mask = ~mask.to(device=ids.device, dtype=torch.bool)  # (B, T): read the wrong way round\n'),
    ]),
    'rope_ignores_positions_lm': ('lm',
        ('# Known-bad for tests/feedback: apply_rope ignores the positions it is given and uses 0..T-1; otherwise\n'
         '# submissions/reference_lm.py.\n'), [
        ('    positions = torch.as_tensor(positions, device=x.device)\n',
         '    positions = torch.arange(x.size(-2), device=x.device)  # (T,): the positions passed in are ignored\n'),
    ]),
    'rope_ignores_positions_reverse': ('reverse',
        ('# Known-bad for tests/feedback: apply_rope ignores the positions it is given and uses 0..T-1; otherwise\n'
         '# submissions/reference_reverse.py.\n'), [
        ('    positions = torch.as_tensor(positions, device=x.device)\n',
         '    positions = torch.arange(x.size(-2), device=x.device)  # (T,): the positions passed in are ignored\n'),
    ]),
    'scale_and_causal_leak_reverse': ('reverse',
        ('# Known-bad for tests/feedback: attention lacks the 1/sqrt(Dh) scale (attention_sdpa fails) and, separately, the\n'
         "# model's causal mask is off by one (causality fails): a correct attention does not fix causality; otherwise\n"
         '# submissions/reference_reverse.py.\n'), [
        ('    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, H, Tq, Tk)\n',
         '    scores = q @ k.transpose(-2, -1)  # (B, H, Tq, Tk): no 1/sqrt(Dh)\n'),
        ('    causal = key_pos <= query_pos  # (Tq, Tk)\n',
         '    causal = key_pos <= query_pos + 1  # (Tq, Tk): off by one, reads the next token\n'),
    ]),
    'softmax_query_axis_lm': ('lm',
        ("# Known-bad for tests/feedback: attention's softmax runs over the queries instead of the keys; otherwise\n"
         '# submissions/reference_lm.py.\n'), [
        ('    weights = torch.softmax(scores, dim=-1)  # (B, H, Tq, Tk), each query row sums to 1\n',
         '    weights = torch.softmax(scores, dim=-2)  # (B, H, Tq, Tk): normalised over the queries\n'),
    ]),
    'softmax_query_axis_reverse': ('reverse',
        ("# Known-bad for tests/feedback: attention's softmax runs over the queries instead of the keys; otherwise\n"
         '# submissions/reference_reverse.py.\n'), [
        ('    weights = torch.softmax(scores, dim=-1)  # (B, H, Tq, Tk), each query row sums to 1\n',
         '    weights = torch.softmax(scores, dim=-2)  # (B, H, Tq, Tk): normalised over the queries\n'),
    ]),
    'split_in_model_lm': ('lm',
        ('# Known-bad for tests/feedback: split_heads lacks the transpose, and the model splits heads with its own method\n'
         '# that has the same bug: a correct module-level split_heads does not reach the model; otherwise\n'
         '# submissions/reference_lm.py.\n'), [
        ('    return x.reshape(batch, length, num_heads, head_dim).transpose(1, 2)  # (B, H, T, Dh)\n',
         '    return x.reshape(batch, num_heads, length, head_dim)  # (B, H, T, Dh): no transpose, heads mix positions\n'),
        (('        self.out_proj = nn.Linear(d_model, d_model)\n'
          '\n'),
         ('        self.out_proj = nn.Linear(d_model, d_model)\n'
          '\n'
          '    def heads(self, x):\n'
          '        """The model\'s own head split, with the same bug: (B, T, D) -> (B, H, T, Dh) without a transpose."""\n'
          '        batch, length, width = x.shape\n'
          '        return x.reshape(batch, self.n_heads, length, width // self.n_heads)  # (B, H, T, Dh)\n'
          '\n')),
        (('        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, Dh)\n'
          '        k = split_heads(self.k_proj(x), self.n_heads)  # (B, H, T, Dh)\n'
          '        v = split_heads(self.v_proj(x), self.n_heads)  # (B, H, T, Dh)\n'),
         ('        q = self.heads(self.q_proj(x))  # (B, H, T, Dh)\n'
          '        k = self.heads(self.k_proj(x))  # (B, H, T, Dh)\n'
          '        v = self.heads(self.v_proj(x))  # (B, H, T, Dh)\n')),
    ]),
    'split_no_transpose_lm': ('lm',
        ('# Known-bad for tests/feedback: split_heads reshapes straight to (B, H, T, Dh) without the transpose; otherwise\n'
         '# submissions/reference_lm.py.\n'), [
        ('    return x.reshape(batch, length, num_heads, head_dim).transpose(1, 2)  # (B, H, T, Dh)\n',
         '    return x.reshape(batch, num_heads, length, head_dim)  # (B, H, T, Dh): no transpose, heads mix positions\n'),
    ]),
    'split_no_transpose_reverse': ('reverse',
        ('# Known-bad for tests/feedback: split_heads reshapes straight to (B, H, T, Dh) without the transpose; otherwise\n'
         '# submissions/reference_reverse.py.\n'), [
        ('    return x.reshape(batch, length, num_heads, head_dim).transpose(1, 2)  # (B, H, T, Dh)\n',
         '    return x.reshape(batch, num_heads, length, head_dim)  # (B, H, T, Dh): no transpose, heads mix positions\n'),
    ]),
}


def source(name: str) -> str:
    """The known-bad submission's text: its header, then its reference with the substitutions made."""
    track, header, substitutions = BUGS[name]
    text = REFERENCES[track].read_text()
    for old, new in substitutions:
        assert text.count(old) == 1, f"{name}: {old!r} occurs {text.count(old)} times in the {track} reference"
        text = text.replace(old, new)
    return header + text
