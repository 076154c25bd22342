"""The frame schema on its own (no sandbox): forged headers become a named refusal, never a judge exception."""
import pytest

from grader.frames import facts_problem, hello_fields, walk_problem
from grader.judge import collect, outcome_from, run_summary, Options
from grader.sandbox.base import SandboxRun
from grader.checks.base import Stage
from grader.harness import wire  # the harness' own module, as the judge's FrameCollector uses it


def nested(depth: int) -> dict:
    top = inner = {}
    for _ in range(depth):
        inner["x"] = {}
        inner = inner["x"]
    return top


def test_the_walk_is_iterative_far_beyond_the_recursion_limit():
    assert "exceeded depth 8" in walk_problem(nested(100_000), "facts")
    deep_list = top = []
    for _ in range(100_000):
        top.append([])
        top = top[0]
    assert "exceeded depth 8" in walk_problem(deep_list, "facts")


@pytest.mark.parametrize("facts, named", [
    ({"empty_row": {"raised": None, "message": "x" * 2001}}, "over 2000"),
    ({"empty_row": {"raised": None, "message": ""}, "extra": 1}, "keys the probe never returns: extra"),
    ({"empty_row": {"raised": 5, "message": ""}}, "facts.empty_row.raised is int, not a string"),
    ({"empty_row": {"raised": None, "message": "", "n": 2 ** 70}}, "integer beyond 64 bits"),
    ({"empty_row": {"raised": None, "message": "", "n": float("-inf")}}, "non-finite number (-inf)"),
    ({"empty_row": {"raised": None, "message": "", "n": list(range(5000))}}, "over 4096"),
    ({"empty_row": {"raised": None, "message": "", "n": object()}}, "not JSON data"),
])
def test_facts_problems_name_the_limit(facts, named):
    assert named in facts_problem("attention", facts)


def test_true_facts_pass():
    assert facts_problem("attention", {"empty_row": {"raised": "ValueError", "message": "no key"}}) is None
    assert facts_problem("gradient", {"trainable": ["blocks.0.attn.q.weight"], "no_grad": []}) is None
    assert facts_problem("causality", {}) is None
    assert facts_problem("shortcuts", {"calls": ["op:scaled_dot_product_attention.default"]}) is None


def test_forged_stage_end_is_an_invalid_outcome():
    header = {"type": "stage_end", "stage": "rope", "status": "ok", "facts": nested(700), "duration_s": 0.1}
    outcome = outcome_from(header, b"", "rope")
    assert outcome.status == "invalid" and "exceeded depth 8" in outcome.message
    for bad in ({"status": "passed"}, {"status": "ok", "duration_s": float("nan")}, {"status": "ok", "message": []},
                {"status": "ok", "traceback": "line 1"}, {"status": "ok", "stdout_bytes": -1}):
        assert outcome_from({"stage": "rope", **bad}, b"", "rope").status == "invalid", bad


def test_collect_ignores_stage_names_that_are_not_strings():
    run = SandboxRun("process", frames=[({"type": "stage_start", "stage": ["rope"]}, b""),
                                        ({"type": "stage_end", "stage": {"a": 1}, "status": "ok"}, b""),
                                        ({"type": "stage_end", "stage": "rope", "status": "ok", "facts": [1]}, b"")])
    outcomes = collect(run, [Stage("rope", "rope", {})])
    assert outcomes["rope"].status == "invalid" and "facts is list, not a dict" in outcomes["rope"].message


def test_run_summary_keeps_only_well_formed_environment_fields():
    run = SandboxRun("process", frames=[({"type": "hello", "torch": {"deep": nested(50)}, "python": "3.11.2",
                                         "threads": 1.5, "import_s": 2.0}, b""),
                                        ({"type": "stage_end", "stage": "rope", "duration_s": float("inf")}, b"")])
    summary = run_summary(run, Options())
    assert summary["environment"] == {"torch": None, "python": "3.11.2", "threads": None}
    assert summary["timings"]["stages"] == {}
    assert hello_fields("not a dict") == {}


def test_a_header_nested_past_the_parser_is_a_frame_error():
    text = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    reader = wire.FrameReader(1 << 20)
    with pytest.raises(wire.FrameError, match="nested too deeply"):
        reader.feed(wire.HEAD.pack(wire.MAGIC, len(text), 0) + text)
