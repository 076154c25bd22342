"""Static validation: every bad file is refused with a message that names the problem."""
import pytest

from grader.source import MAX_BYTES, Rejected, find_track, read_source, shortcut_uses

GOOD = 'TRACK = "lm"\n'


@pytest.mark.parametrize("data, needle", [
    (b"", "empty"),
    (b"TRACK = 'lm'\x00\n", "NUL byte at offset 12"),
    (b"TRACK = '\xff'\n", "not UTF-8"),
    (b"#" * (MAX_BYTES + 1), "limit is 262144 bytes"),
    (b"TRACK = 'lm'\ndef f(:\n", "line 2"),
])
def test_rejected_with_named_problem(data, needle):
    with pytest.raises(Rejected) as info:
        read_source(data)
    assert needle in str(info.value), f"message {info.value!r} should mention {needle!r}"


@pytest.mark.parametrize("text, track, needle", [
    (GOOD, "lm", None),
    ('TRACK = "reverse"\n', "reverse", None),
    ("x = 1\n", None, "TRACK is missing"),
    ('TRACK = "gpt"\n', None, "must be \"reverse\" or \"lm\""),
    ('TRACK = "l" + "m"\n', None, "plain string literal"),
    ('TRACK: str = "lm"\n', "lm", None),
])
def test_track(text, track, needle):
    import ast
    got, problem = find_track(ast.parse(text))
    assert got == track
    assert (problem is None) if needle is None else (needle in problem), problem


def test_source_keeps_sha256_and_track():
    source = read_source(GOOD.encode())
    assert source.track == "lm" and len(source.sha256) == 64


@pytest.mark.parametrize("code, expected", [
    ("import torch.nn.functional as F\nF.scaled_dot_product_attention(q, k, v)\n", "line 2: uses .scaled_dot_product_attention"),
    ("import torch\nm = torch.nn.MultiheadAttention(8, 2)\n", "line 2: uses .MultiheadAttention"),
    ("from torch.nn import TransformerEncoderLayer\n", "line 1: imports TransformerEncoderLayer from torch.nn"),
    ("from torch.nn.attention import sdpa_kernel\n", "line 1: imports from torch.nn.attention"),
    ("import torch\nf = getattr(torch.nn.functional, 'scaled_dot' + '_product_attention')\n",
     "line 2: getattr with a computed name (write the attribute out: obj.name)"),
    ("import torch\nf = getattr(torch.nn.functional, 'scaled_dot_product_attention')\n", "line 2: uses .scaled_dot_product_attention"),
])
def test_shortcut_scan(code, expected):
    import ast
    hits = shortcut_uses(ast.parse(code))
    assert expected in hits, hits


def test_docstrings_may_mention_shortcuts():
    code = '"""We do not use scaled_dot_product_attention."""\ndef f():\n    """Unlike nn.MultiheadAttention."""\n'
    import ast
    assert shortcut_uses(ast.parse(code)) == []
