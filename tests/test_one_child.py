"""The plain checks share one child of the sandbox (grader/harness/main.py): a check that crashes or hangs there
costs only itself, every other verdict is the one a child per check gives, and state a check leaves behind in the
shared child cannot carry one check's model into another's "fresh process"."""
import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits
from tests.support.grading import REFERENCES, by_id, explain, grade_started_ahead

pytestmark = pytest.mark.slow

CORRECTNESS = ("split_heads", "attention_sdpa", "rope", "gradient_path", "causality", "padding", "kv_cache",
               "checkpoint_reload", "no_shortcuts")


def grade_both(text: str, stage_s: float = 30.0) -> tuple[dict, dict]:
    """The same submission graded with the checks in one child and with a child per check. The one-child grading
    also runs as a worker's does, in a sandbox started ahead whose children were forked before the job came: it
    must give the very same verdicts."""
    reports = []
    for one_child in (True, False):
        options = Options(only=CORRECTNESS, limits=Limits(stage_s=stage_s), one_child=one_child)
        reports.append(grade_bytes(text.encode(), "submission.py", options))
    ahead = grade_started_ahead(text, Options(only=CORRECTNESS, limits=Limits(stage_s=stage_s)))
    assert verdicts(ahead) == verdicts(reports[0]), explain(ahead) + explain(reports[0])
    return reports[0], reports[1]


def verdicts(report: dict) -> list:
    return [(c["id"], c["status"], c["message"], c["stdout"]) for c in report["checks"]]


def lm_with(tail: str) -> str:
    """The lm reference with code appended (run at import, after the reference's definitions)."""
    return REFERENCES["lm"].read_text() + "\n" + tail + "\n"


# A model whose logits depend on a plain attribute, not in its state dict: reloading the state dict into a model
# built under another seed cannot reproduce them. The cheat keeps the first model built in the process (in
# builtins, which outlives the module) and returns it from every later build_model: in one process shared by the
# checkpoint's save and load, load_state_dict would "work".
STASH = """
import builtins as _builtins
import torch as _torch

class _Shifted(_torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.shift = _torch.randn(())  # a plain attribute: not saved by state_dict

    def forward(self, ids, mask=None, cache=None):
        logits, cache = self.inner(ids, mask=mask, cache=cache)
        return logits + self.shift, cache

_reference_build = build_model

def build_model(config):
    kept = getattr(_builtins, "_kept_model", None)
    if kept is not None:
        return kept
    model = _Shifted(_reference_build(config))
    _builtins._kept_model = model
    return model
"""


def test_a_model_kept_from_another_check_does_not_pass_the_reload():
    one, per_check = grade_both(lm_with(STASH))
    assert by_id(one)["checkpoint_reload"]["status"] == "fail", explain(one)
    assert by_id(per_check)["checkpoint_reload"]["status"] == "fail", explain(per_check)


def test_the_reference_gets_the_same_verdicts_either_way():
    one, per_check = grade_both(REFERENCES["lm"].read_text())
    assert verdicts(one) == verdicts(per_check)
    assert all(c["status"] == "pass" for c in one["checks"]), explain(one)


def test_each_check_shows_what_it_printed():
    tail = """
print("imported")
_reference_rope = apply_rope

def apply_rope(x, positions):
    print("rope called")
    return _reference_rope(x, positions)
"""
    one, per_check = grade_both(lm_with(tail))
    assert verdicts(one) == verdicts(per_check), explain(one) + explain(per_check)
    assert by_id(one)["split_heads"]["stdout"] == "imported\n", by_id(one)["split_heads"]["stdout"]
    assert by_id(one)["rope"]["stdout"].startswith("imported\nrope called\n"), by_id(one)["rope"]["stdout"]


def test_global_state_left_by_one_check_is_reset_for_the_next():
    # attention leaves float16 as the default dtype, gradients off, the RNG drawn from and a tripwire record;
    # every later check starts from the harness's state, as a child of its own would.
    tail = """
import torch as _torch
import torch.nn.functional as _F
_reference_attention = attention

def attention(q, k, v, mask=None):
    out = _reference_attention(q, k, v, mask=mask)
    _torch.rand(1000)
    _torch.set_grad_enabled(False)
    try:
        _F.scaled_dot_product_attention(q, k, v)
    except Exception:
        pass
    _torch.set_default_dtype(_torch.float16)
    return out
"""
    one, per_check = grade_both(lm_with(tail))
    assert verdicts(one) == verdicts(per_check), explain(one) + explain(per_check)


def test_the_next_check_finds_the_state_a_child_of_its_own_would():
    """The reset shown where it can be seen: attention draws from both generators, turns gradients off and sets the
    default dtype, and rope's apply_rope raises with what it finds (the checks' own inputs never read Python's
    generator, so only the reset puts it back)."""
    tail = """
import random as _random
import torch as _torch
_reference_attention = attention

def attention(q, k, v, mask=None):
    out = _reference_attention(q, k, v, mask=mask)
    _random.random()
    _torch.rand(1000)
    _torch.set_grad_enabled(False)
    _torch.set_default_dtype(_torch.float16)
    return out

def apply_rope(x, positions):
    raise RuntimeError(f"found {_random.random():.12f} {float(_torch.rand(1)):.12f} {_torch.is_grad_enabled()} "
                       f"{_torch.get_default_dtype()}")
"""
    one, per_check = grade_both(lm_with(tail))
    rope, alone = by_id(one)["rope"], by_id(per_check)["rope"]
    assert rope["status"] == "error" and "found 0." in rope["message"], explain(one)
    assert rope["message"] == alone["message"], (rope["message"], alone["message"])


def test_a_crash_in_the_shared_child_costs_only_that_check():
    tail = """
import os as _os
_reference_rope = apply_rope

def apply_rope(x, positions):
    if x.shape[-1] % 2:  # only the rope check's odd width: the model's calls go through
        _os._exit(3)
    return _reference_rope(x, positions)
"""
    one, per_check = grade_both(lm_with(tail))
    assert by_id(one)["rope"]["status"] == "crash", explain(one)
    assert verdicts(one) == verdicts(per_check), explain(one) + explain(per_check)
    assert all(c["status"] == "pass" for c in one["checks"] if c["id"] != "rope"), explain(one)


def test_a_hang_in_the_shared_child_costs_only_that_check():
    tail = """
import time as _time
_reference_split = split_heads

def split_heads(x, num_heads):
    while x.shape[-1] % num_heads:  # only the split_heads check's bad width: the model's calls go through
        _time.sleep(0.01)
    return _reference_split(x, num_heads)
"""
    one, per_check = grade_both(lm_with(tail), stage_s=2.0)
    assert by_id(one)["split_heads"]["status"] == "timeout", explain(one)
    assert all(c["status"] == "pass" for c in one["checks"] if c["id"] != "split_heads"), explain(one)
    assert verdicts(one) == verdicts(per_check), explain(one) + explain(per_check)


def test_a_reload_whose_save_failed_is_not_run_either_way():
    # the reload's child is forked while the shared child runs; with nothing saved it is stopped, not run
    tail = """
_reference_build = build_model

def build_model(config):
    model = _reference_build(config)
    model.state_dict = lambda *args, **kwargs: {"weights": 1}
    return model
"""
    one, per_check = grade_both(lm_with(tail))
    assert by_id(one)["checkpoint_reload"]["status"] == "fail", explain(one)
    assert verdicts(one) == verdicts(per_check), explain(one) + explain(per_check)


def test_an_error_in_the_reloads_fresh_child_points_at_the_students_line():
    # the reload runs in a child of its own (a spare forked ahead, in a sandbox started ahead): the submission's
    # code there is the judge's compilation, and its traceback must still name the student's file and line
    tail = """
_reference_build = build_model

def build_model(config):
    model = _reference_build(config)

    def refuse(*args, **kwargs):
        raise ValueError("no reload here")
    model._load_from_state_dict = refuse
    return model
"""
    one, per_check = grade_both(lm_with(tail))
    for report in (one, per_check):
        check = by_id(report)["checkpoint_reload"]
        assert check["status"] == "error" and "ValueError: no reload here" in check["message"], explain(report)
        assert check["details"][-1].startswith("line ") and 'raise ValueError("no reload here")' in \
            check["details"][-1], check["details"]
