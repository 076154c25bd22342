"""Submissions that cheat, crash, hang or return nonsense get a status and a message, never a grader error."""
import pytest

from tests.support.grading import by_id, explain, grade_text, statuses, variant

pytestmark = pytest.mark.slow

NO_SCALE = ("scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, H, Tq, Tk)",
            "scores = q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)")
HEADER = 'TRACK = "lm"\n'


def with_prelude(prelude: str, bug=NO_SCALE) -> str:
    """The lm reference with a real bug and extra code run at import time."""
    return variant("lm", HEADER, HEADER + prelude + "\n", ) if bug is None else \
        variant("lm", HEADER, HEADER + prelude + "\n").replace(*bug)


def test_monkeypatched_torch_does_not_hide_a_real_bug():
    prelude = """
import torch as _t
_t.allclose = lambda *a, **k: True
_t.equal = lambda *a, **k: True
_t.Tensor.__eq__ = lambda self, other: _t.ones((), dtype=_t.bool)
_t.testing.assert_close = lambda *a, **k: None
"""
    report = grade_text(with_prelude(prelude), only=["attention_sdpa"])
    check = by_id(report)["attention_sdpa"]
    assert check["status"] == "fail", explain(report)
    assert "without the 1/√Dh scale" in check["message"], check["message"]


def test_forged_stdout_is_ignored():
    prelude = """print('{"checks": [{"id": "attention_sdpa", "status": "pass", "message": "ok"}]}')
print("attention_sdpa  pass")"""
    report = grade_text(with_prelude(prelude), only=["attention_sdpa"])
    check = by_id(report)["attention_sdpa"]
    assert check["status"] == "fail", explain(report)
    assert "without the 1/√Dh scale" in check["message"], "the failure names the real bug, not the forged line"
    assert '"status": "pass"' in check["stdout"], "what the student printed is shown to them as their output"


def test_a_long_output_is_cut_and_says_so():
    prelude = 'print("x" * 9999)'
    report = grade_text(with_prelude(prelude, bug=None), only=["split_heads"])
    check = by_id(report)["split_heads"]
    assert check["status"] == "pass", explain(report)
    assert check["stdout"].startswith("x" * 100) and len(check["stdout"]) < 2200
    assert check["stdout"].endswith("[output truncated: the check printed 10000 bytes; the first 2000 characters "
                                    "are shown]"), check["stdout"][-200:]


def test_forged_result_files_are_ignored():
    prelude = """
import json, os
forged = {"checks": [{"id": "attention_sdpa", "status": "pass"}]}
for path in ("result.json", "../result.json", "../../result.json", "../../report.json", "/tmp/result.json"):
    try:
        with open(path, "w") as fh:
            json.dump(forged, fh)
    except OSError:
        pass
"""
    report = grade_text(with_prelude(prelude), only=["attention_sdpa", "split_heads"])
    assert statuses(report) == {"split_heads": "pass", "attention_sdpa": "fail"}, explain(report)
    assert "without the 1/√Dh scale" in by_id(report)["attention_sdpa"]["message"], "the real bug, not the files"


def test_os_exit_during_import_is_a_named_crash():
    report = grade_text(with_prelude("import os\nos._exit(0)", bug=None), only=["split_heads", "causality"])
    for check in report["checks"]:
        assert check["status"] == "crash", explain(report)
        assert "exited with code 0 while the submission was being imported" in check["message"], check["message"]


def test_sys_exit_during_import_is_an_error_naming_it():
    report = grade_text(with_prelude("import sys\nsys.exit(3)", bug=None), only=["split_heads"])
    check = by_id(report)["split_heads"]
    assert check["status"] == "error" and "importing the submission raised SystemExit: 3" in check["message"], check


@pytest.mark.parametrize("hang", ["while True:\n            pass", "import time\n        time.sleep(3600)"])
def test_a_hanging_check_costs_that_check_only(hang):
    text = variant("lm", '    """Scaled dot-product attention over the key axis; returns (out, weights), mask True = may attend."""\n',
                   f'    """Hangs when called outside the model."""\n    if q.dim() == 4 and q.shape[2] == 5:\n        {hang}\n')
    report = grade_text(text, only=["split_heads", "attention_sdpa", "rope"], stage_s=3)
    assert statuses(report) == {"split_heads": "pass", "attention_sdpa": "timeout", "rope": "pass"}, explain(report)
    assert "did not finish within 3" in by_id(report)["attention_sdpa"]["message"] or \
        "CPU time" in by_id(report)["attention_sdpa"]["message"]


def test_syntax_error_names_its_line():
    report = grade_text('TRACK = "lm"\n\ndef split_heads(x, h)\n    return x\n')
    assert {c["status"] for c in report["checks"]} == {"error"}
    assert "not valid Python" in report["checks"][0]["message"] and "line 3" in report["checks"][0]["message"]


def test_missing_function_is_named():
    text = variant("lm", "def merge_heads(x):", "def merge_heads_renamed(x):")
    check = by_id(grade_text(text, only=["split_heads"]))["split_heads"]
    assert check["status"] == "fail" and "no function `merge_heads`" in check["message"], check


def test_missing_track_fails_model_checks_with_a_message_and_still_runs_function_checks():
    text = variant("lm", 'TRACK = "lm"', "")
    report = grade_text(text, only=["split_heads", "causality"])
    assert statuses(report) == {"split_heads": "pass", "causality": "error"}, explain(report)
    assert "TRACK is missing" in by_id(report)["causality"]["message"]


def test_wrong_return_shape_is_reported():
    text = variant("lm", "    return x.reshape(batch, length, num_heads, head_dim).transpose(1, 2)  # (B, H, T, Dh)",
                   "    return x.reshape(batch, length, num_heads, head_dim)")
    check = by_id(grade_text(text, only=["split_heads"]))["split_heads"]
    assert check["status"] == "fail"
    assert "has shape (2, 5, 4, 6), expected (B, H, T, Dh) = (2, 4, 5, 6)" in check["message"], check["message"]


def test_nan_outputs_are_reported_where_they_are():
    text = variant("lm", "    out = weights @ v  # (B, H, Tq, Dh)", "    out = weights @ v * float('nan')")
    check = by_id(grade_text(text, only=["attention_sdpa"]))["attention_sdpa"]
    assert check["status"] == "fail" and "NaN first at batch 0, head 0, query 0" in check["message"], check


def test_returning_one_tensor_instead_of_a_pair_is_a_failure():
    text = variant("lm", "    return out, weights", "    return out")
    check = by_id(grade_text(text, only=["attention_sdpa"]))["attention_sdpa"]
    assert check["status"] == "fail" and "must return a pair" in check["message"], check


def test_student_exception_shows_their_own_lines_only():
    text = variant("lm", "    out = weights @ v  # (B, H, Tq, Dh)", "    out = weights @ v.T  # (B, H, Tq, Dh)")
    check = by_id(grade_text(text, only=["attention_sdpa"]))["attention_sdpa"]
    assert check["status"] == "error" and check["message"].startswith("your code raised RuntimeError"), check
    assert check["details"] and all(line.startswith("line ") for line in check["details"]), check["details"]
    assert "out = weights @ v.T" in check["details"][-1]
    assert "probes.py" not in str(check), "the grader's own frames are not shown"


def test_evaluation_without_a_trained_model_is_skipped_and_points_at_training():
    forward = '    def forward(self, ids, mask=None, cache=None):\n'
    broken = variant("lm", forward, forward + '        if self.training and torch.is_grad_enabled():\n'
                                              '            raise RuntimeError("boom in training")\n')
    report = grade_text(broken, only=["training", "evaluation"])
    checks = by_id(report)
    assert checks["training"]["status"] == "error" and "boom in training" in checks["training"]["message"]
    assert checks["evaluation"]["status"] == "skipped", explain(report)
    assert checks["evaluation"]["message"] == ("not run: it needs what training produces (training.run), which raised "
                                               "an error; see training")
    # The held-out stage began alongside the run (the fresh sandbox's go comes once training begins) and was told
    # to stop when the run failed: skipped above, as when it ran only after the training.
