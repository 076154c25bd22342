"""Hidden shortcuts: attention computed by torch's SDPA reached without naming it plainly.

Every spelling fails no_shortcuts with the line of the hidden call, read from the source by the judge (the
static layer); the spellings that really call SDPA are also recorded in the sandbox (the run-time layer,
down to aten ops and kernels). attention_sdpa's verdict is irrelevant here: the output is SDPA's own.
"""
import pytest

from .integrity_support import BACKENDS, graded_on, reference

pytestmark = pytest.mark.slow

OUT_LINE = "    out = weights @ v  # (B, H, Tq, Dh)\n"
# name -> (lines added at the top of the file, the line computing `out` that hides the call)
SPELLINGS = {
    "join_and_wrapped": ("import torch.nn.functional as F\n",
                         '    out = getattr(F, "_".join(["scaled", "dot", "product", "attention"])).__wrapped__(q, k, v, '
                         'attn_mask=None if mask is None else allowed)\n'),
    "aten_by_concatenation": ("", '    out = getattr(torch.ops.aten, "scaled_dot" + "_product_attention")(q, k, v, '
                                  'None if mask is None else allowed)\n'),
    "aten_direct": ("", "    out = torch.ops.aten.scaled_dot_product_attention(q, k, v, None if mask is None else allowed)\n"),
    "module_alias": ("import torch.nn.functional as G\n",
                     "    out = G.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else allowed)\n"),
    "from_import_as": ("from torch.nn.functional import scaled_dot_product_attention as s\n",
                       "    out = s(q, k, v, attn_mask=None if mask is None else allowed)\n"),
    "from_import_module": ("from torch.nn import functional\n",
                           "    out = functional.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else "
                           "allowed)\n"),
    "module_dict": ("import torch.nn.functional as F\n",
                    '    out = F.__dict__["scaled_dot" + "_product_attention"](q, k, v, attn_mask=None if mask is None '
                    'else allowed)\n'),
    "function_globals": ("", '    out = torch.softmax.__globals__ and torch.nn.functional.softmax.__globals__['
                             '"scaled_dot_product" + "_attention"](q, k, v, attn_mask=None if mask is None else allowed)\n'),
    "vars_lookup": ("import torch.nn.functional as F\n",
                    '    out = vars(F)["scaled_dot" + "_product_attention"](q, k, v, attn_mask=None if mask is None else '
                    'allowed)\n'),
    "eval_text": ("", '    out = eval("torch.nn.functional." + "scaled_dot" + "_product_attention")(q, k, v, '
                      'attn_mask=None if mask is None else allowed)\n'),
    "importlib_module": ("import importlib\n",
                         '    out = importlib.import_module("torch.nn.functional").__getattribute__("scaled_dot" + '
                         '"_product_attention")(q, k, v, attn_mask=None if mask is None else allowed)\n'),
    "torch_C_binding": ("", "    out = torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None "
                            "else allowed)\n"),
}
# the run-time layer must record these (they call SDPA through paths the Python-level wrapper does not see)
RECORDED = ("join_and_wrapped", "aten_by_concatenation", "aten_direct", "torch_C_binding", "module_alias")


def hidden(name: str) -> tuple[str, int]:
    """The lm reference with attention's output computed by the hidden spelling, and that line's number."""
    top, line = SPELLINGS[name]
    text = reference("lm")
    assert text.count(OUT_LINE) == 1
    text = text.replace("import math\n", "import math\n" + top, 1)
    # `allowed` exists only when a mask was given: the hidden call reads it only then
    text = text.replace(OUT_LINE, line)
    return text, text.splitlines().index(line.rstrip("\n")) + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_hidden_shortcut_fails_with_its_line(name, backend):
    text, line = hidden(name)
    report = graded_on(text, backend, ("split_heads", "no_shortcuts"))
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["split_heads"]["status"] == "pass", checks["split_heads"]
    check = checks["no_shortcuts"]
    assert check["status"] == "fail", check
    assert f"line {line}:" in check["message"], (line, check["message"])
    if name in RECORDED:
        recorded = [d for d in check["details"] if d.startswith("calls to forbidden shortcuts were recorded")]
        assert recorded and "scaled_dot_product" in recorded[0], check["details"]


@pytest.mark.parametrize("track", ["lm", "reverse"])
def test_the_references_and_template_pass_the_static_rule(track):
    from grader.shortcuts import shortcut_uses
    from grader.source import read_source
    from .integrity_support import ROOT
    for path in (ROOT / "submissions" / f"reference_{track}.py", ROOT / "submissions" / "template.py"):
        assert shortcut_uses(read_source(path.read_bytes()).tree) == [], path


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("track", ["lm", "reverse"])
def test_the_references_pass_no_shortcuts(track, backend):
    check = graded_on(reference(track), backend, ("no_shortcuts",))["checks"][0]
    assert check["status"] == "pass", check


# More ways to reach a function without naming it, read statically only (no sandbox): each must be flagged on
# the line given (1-based, in the snippet).
STATIC_ONLY = {
    "private_kernel_via_list": ("import torch\nt = [torch][0]\nt._scaled_dot_product_flash_attention_for_cpu(q, k, v)\n", 3),
    "attrgetter": ('import operator\nimport torch.nn.functional as F\nf = operator.attrgetter("softmax")(F)\n', 3),
    "reduce_getattr": ("import functools\nf = functools.reduce(getattr, ['nn', 'functional'], torch)\n", 2),
    "formatter_get_field": ('import string\nf = string.Formatter().get_field("0.softmax", (F,), {})[0]\n', 2),
    "pydoc_locate": ('import pydoc\nf = pydoc.locate("torch.nn.functional.sof" + "tmax")\n', 1),
    "timeit_string": ('import timeit\ntimeit.timeit("import torch", number=1)\n', 1),
    "type_hints_eval": ("import typing\ndef f(x: 'torch.nn.functional'): pass\ntyping.get_type_hints(f)\n", 3),
    "subclasses_walk": ("x = ().__class__.__base__.__subclasses__()\n", 1),
    "gc_objects": ("import gc\nfns = gc.get_objects()\n", 1),
    "sys_modules": ('import sys\nF = sys.modules["torch.nn.functional"]\n', 2),
    "frame_globals": ("import sys\ng = sys._getframe(1).f_globals\n", 2),
    "match_class_attribute": ("import torch.nn.functional as F\nmatch F:\n    case object(scaled_dot_product_attention=f):\n"
                              "        pass\n", 3),
    "torch_load_pickle": ('import torch, io\nf = torch.load(io.BytesIO(b""), weights_only=False)\n', 2),
    "subprocess_python": ('import subprocess\nsubprocess.run(["python", "-c", "print(1)"])\n', 1),
    "harness_module": ("import probes\nprobes.TRIPWIRE_CALLS.clear()\n", 1),
    "exec_joined": ('exec("".join(["import torch"]))\n', 1),
    "lambda_code": ("f = (lambda: 0).__code__\n", 1),
    "setattr_computed": ("setattr(model, name, None)\n", 1),
}


@pytest.mark.parametrize("name", sorted(STATIC_ONLY))
def test_more_hidden_spellings_are_read_statically(name):
    import ast

    from grader.shortcuts import shortcut_uses
    code, line = STATIC_ONLY[name]
    hits = shortcut_uses(ast.parse(code))
    assert any(h.startswith(f"line {line}:") for h in hits), hits
