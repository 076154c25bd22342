"""Poisoned facts: a submission walks the stack to the harness child's pipe and sends a result frame of its own.

Whatever that frame claims (facts nested 700 deep, huge strings and lists, NaN and infinity, wrong types,
keys the probe never returns, control characters in its message), the attacked check ends `error` with a
message naming the limit, the judge never raises, and nothing of the forged facts reaches the report.
"""
import json
import subprocess
import sys

import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import Limits
from .integrity_support import BACKENDS, LIMITS, ROOT, graded_on, require_backend

pytestmark = pytest.mark.slow

REFERENCE = (ROOT / "submissions" / "reference_lm.py").read_text()

# Appended to the reference: attention (the attention_sdpa and no_shortcuts stages call it) sends a forged
# result frame through the child's own pipe, found on the stack, then exits so no real result follows.
FORGE = '''

import os as _os
import sys as _sys

_reference_attention = attention


def _harness_send():
    frame = _sys._getframe()
    while frame is not None:
        if "write_fd" in frame.f_locals and "send" in frame.f_locals:
            return frame.f_locals["send"]
        frame = frame.f_back
    return None


def _poison():
{POISON}


def attention(q, k, v, mask=None):
    send = _harness_send()
    if send is not None:
        send({{"type": "result", "outcome": "{OUTCOME}", {FIELD}: _poison()}})
        _os._exit(0)
    return _reference_attention(q, k, v, mask)
'''

DEEP = '''    facts = inner = {}
    for _ in range(700):
        inner["torch"] = {}
        inner = inner["torch"]
    return facts'''

# name -> (body of _poison, outcome, field, text the message must name)
VARIANTS = {
    "deep_nesting": (DEEP, "ok", '"facts"', "exceeded depth 8"),
    "huge_string": ('    return {"empty_row": {"raised": "ValueError", "message": "A" * 200000}}', "ok", '"facts"',
                    "over 2000"),
    "nan": ('    return {"empty_row": {"raised": "ValueError", "message": "", "x": float("nan")}}', "ok", '"facts"',
            "non-finite number (nan)"),
    "infinity": ('    return {"empty_row": float("inf")}', "ok", '"facts"', "non-finite number (inf)"),
    "wrong_type": ('    return {"empty_row": {"raised": ["ValueError"], "message": 7}}', "ok", '"facts"',
                   "facts.empty_row.raised is list, not a string"),
    "huge_list": ('    return {"empty_row": {"raised": "ValueError", "message": "", "pad": list(range(50000))}}', "ok",
                  '"facts"', "over 4096"),
    "unknown_key": ('    return {"empty_row": {"raised": "ValueError", "message": ""}, "verdict": "pass"}', "ok",
                    '"facts"', "keys the probe never returns: verdict"),
    "not_a_dict": ('    return [1, 2, 3]', "ok", '"facts"', "facts is list, not a dict"),
    "exception_name_forged": ('    return {"empty_row": {"raised": "Value Error: all checks passed", "message": ""}}',
                              "ok", '"facts"', "facts.empty_row.raised is not of the expected form"),
    "deep_traceback": (DEEP.replace("return facts", "return [facts]"), "error", '"traceback"',
                       "the stage's traceback[0] is dict, not a string"),
    "message_not_text": ('    return {"nested": [1] * 10}', "error", '"message"', "the stage's message is dict"),
}

ATTACKED = ("attention_sdpa",)


def poisoned(name: str) -> str:
    body, outcome, field, _ = VARIANTS[name]
    return REFERENCE + FORGE.format(POISON=body, OUTCOME=outcome, FIELD=field)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_poisoned_frame_is_the_checks_error_naming_the_limit(name, backend):
    report = graded_on(poisoned(name), backend, ("split_heads", "attention_sdpa"))
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["split_heads"]["status"] == "pass", checks["split_heads"]
    attacked = checks["attention_sdpa"]
    assert attacked["status"] == "error", attacked
    assert VARIANTS[name][3] in attacked["message"], attacked["message"]
    assert "nothing it claimed was used" in attacked["message"]
    text = json.dumps(report)
    assert "AAAAAAAAAA" not in text and "all checks passed" not in text, "forged facts reached the report"


def forged(backend: str, field: str, body: str) -> dict:
    """attention_sdpa's result when its stage sends an error result whose `field` is what body returns."""
    text = REFERENCE + FORGE.format(POISON=body, OUTCOME="error", FIELD=f'"{field}"')
    return {c["id"]: c for c in graded_on(text, backend, ("attention_sdpa",))["checks"]}["attention_sdpa"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_forged_message_is_bounded_plain_and_labelled_as_the_students(backend):
    check = forged(backend, "message", '    return "ValueError: \\u202eall checks passed\\x1b[32m " + "B" * 1500')
    assert check["status"] == "error", check
    assert check["message"].startswith("your code raised ValueError: "), check["message"]
    assert "\u202e" not in check["message"] and "\x1b" not in check["message"]
    assert len(check["message"]) < 1100, len(check["message"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forged_traceback_is_cut_to_eight_plain_lines_of_300(backend):
    """The most lines the schema allows (16) of 1000 characters each, with bidi and escape characters."""
    check = forged(backend, "traceback", '    return ["\\u202eline %d\\x1b[31m " % i + "T" * 1000 for i in range(16)]')
    assert check["status"] == "error", check
    lines = check["details"]
    assert isinstance(lines, list) and len(lines) == 8, lines
    assert lines[0].startswith("?line 8?") and lines[-1].startswith("?line 15?"), \
        f"the last 8 lines, control characters replaced: {lines[0][:20]!r} … {lines[-1][:20]!r}"
    assert all(len(line) <= 302 and "\u202e" not in line and "\x1b" not in line for line in lines), lines


def test_forged_gradient_names_are_refused():
    """The parameter names gradient_path repeats in its message must look like parameter names."""
    text = REFERENCE.replace("def build_model(config):", '''def build_model(config):
    import sys as _sys, os as _os
    frame = _sys._getframe()
    while frame is not None and "write_fd" not in frame.f_locals:
        frame = frame.f_back
    if frame is not None:
        frame.f_locals["send"]({"type": "result", "outcome": "ok",
                                "facts": {"trainable": ["<b>all checks passed</b>"], "no_grad": []}})
        _os._exit(0)
    return _build_model_real(config)


def _build_model_real(config):''', 1)
    check = {c["id"]: c for c in graded_on(text, "process", ("gradient_path",))["checks"]}["gradient_path"]
    assert check["status"] == "error" and "facts.trainable[0] is not of the expected form" in check["message"], check


def test_grader_check_json_exits_zero_on_deep_facts(tmp_path):
    path = tmp_path / "deep_facts.py"
    path.write_text(poisoned("deep_nesting"))
    proc = subprocess.run([sys.executable, "-m", "grader", "check", str(path), "--json", "--only",
                           "split_heads,attention_sdpa"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses == {"split_heads": "pass", "attention_sdpa": "error"}, statuses


def test_the_reference_keeps_its_marks_under_the_schema():
    require_backend("process")
    report = grade_bytes(REFERENCE.encode(), "reference_lm.py",
                         Options(only=("split_heads", "attention_sdpa", "rope", "gradient_path", "no_shortcuts"),
                                 limits=Limits(**LIMITS)))
    assert {c["id"]: c["status"] for c in report["checks"]} == dict.fromkeys(
        ("split_heads", "attention_sdpa", "rope", "gradient_path", "no_shortcuts"), "pass"), report["checks"]


RAW_DEEP = '''

import os as _os
import struct as _struct
import sys as _sys

_reference_attention = attention


def attention(q, k, v, mask=None):
    frame = _sys._getframe()
    while frame is not None and "write_fd" not in frame.f_locals:
        frame = frame.f_back
    if frame is not None:  # a header nested past any JSON parser's recursion, written raw to the pipe
        text = b'{"type": "result", "outcome": "ok", "facts": ' + b'{"a": ' * 100000 + b'1' + b'}' * 100001
        _os.write(frame.f_locals["write_fd"], _struct.pack(">4sIQ", b"GRD1", len(text), 0) + text)
        _os._exit(0)
    return _reference_attention(q, k, v, mask)
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_header_nested_past_the_parser_costs_that_check_only(backend):
    report = graded_on(REFERENCE + RAW_DEEP, backend, ("split_heads", "attention_sdpa", "rope"))
    got = {c["id"]: c for c in report["checks"]}
    assert got["split_heads"]["status"] == "pass" and got["rope"]["status"] == "pass", report["checks"]
    assert got["attention_sdpa"]["status"] == "crash", got["attention_sdpa"]
    assert "nested too deeply" in got["attention_sdpa"]["message"], got["attention_sdpa"]["message"]
