"""grader/rootcause.py without a sandbox: which failures it diagnoses, when it stays silent, and what the harness's
reference functions compute (the references' own)."""
import importlib.util
from types import SimpleNamespace

import pytest
import torch

from grader import rootcause
from grader.checks.base import Stage
from grader.harness import reference_parts
from grader.results import CheckResult, StageOutcome
from grader.sandbox.base import HARNESS_FILES
from tests.support.grading import REFERENCES


def check(cid, needs_track=True):
    return SimpleNamespace(ID=cid, NEEDS_TRACK=needs_track)


def setup(model_status="fail", function_statuses=None):
    """A grading with function checks and causality planned, and their first-pass results."""
    function_statuses = function_statuses or {"split_heads": "fail", "attention_sdpa": "pass"}
    checks = [check(cid, False) for cid in function_statuses] + [check("causality")]
    plans = {c.ID: [Stage(c.ID, c.ID, {}, {"n": 1})] for c in checks}
    results = {cid: CheckResult(cid, s, "") for cid, s in function_statuses.items()}
    results["causality"] = CheckResult("causality", model_status, "")
    outcomes = {c.ID: StageOutcome(c.ID, "ok") for c in checks}
    return checks, plans, results, outcomes


def run(checks, plans, results, outcomes, passes_with=(), rerun=None):
    """attribute() with a decide that passes a re-run whose params substitute one of passes_with."""
    seen = []

    def fake_rerun(stages):
        seen.extend(stages)
        return {s.key: StageOutcome(s.key, "ok", facts={"sub": s.params["substitute"]}) for s in stages}

    def decide(chk, ctx, plan, got, graded):
        fixed = any(set(o.facts.get("sub", ())) == set(p) for o in got.values() for p in passes_with)
        return CheckResult(chk.ID, "pass" if fixed else "fail", "")
    took = rootcause.attribute(None, checks, plans, results, outcomes, 30.0, decide, rerun or fake_rerun)
    return took, seen


def test_reference_parts_is_copied_into_every_sandbox():
    assert "reference_parts.py" in HARNESS_FILES


@pytest.mark.parametrize("track", sorted(REFERENCES))
def test_reference_parts_compute_what_the_references_compute(track):
    spec = importlib.util.spec_from_file_location(f"ref_{track}", REFERENCES[track])
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 12, generator=gen, dtype=torch.float64)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(2, 1, 5, 5, generator=gen) > 0.3
    mask |= torch.eye(5, dtype=torch.bool)
    assert torch.equal(reference_parts.split_heads(x, 3), ref.split_heads(x, 3))
    assert torch.equal(reference_parts.merge_heads(q), ref.merge_heads(q))
    for a, b in zip(reference_parts.attention(q, k, v, mask), ref.attention(q, k, v, mask)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    for pos in (torch.arange(5), torch.arange(10).view(2, 5)):
        torch.testing.assert_close(reference_parts.apply_rope(q, pos), ref.apply_rope(q, pos), rtol=0, atol=1e-12)


def test_substitute_sets_only_known_functions():
    module = SimpleNamespace(split_heads=None, attention=None, other=1)
    reference_parts.substitute(module, ["split_heads", "other", 3])
    assert module.split_heads is reference_parts.split_heads and module.attention is None and module.other == 1
    reference_parts.substitute(module, "attention")  # not a list: nothing
    assert module.attention is None


def test_a_substitution_that_fixes_the_check_is_named():
    checks, plans, results, outcomes = setup()
    took, seen = run(checks, plans, results, outcomes, passes_with=[("split_heads", "merge_heads")])
    assert took is not None and [s.key for s in seen] == ["causality@split_heads+merge_heads"]
    assert seen[0].params == {"n": 1, "substitute": ["split_heads", "merge_heads"]}, "the stage's own params kept"
    assert results["causality"].root_cause == {
        "check": "split_heads", "evidence": "with a correct split_heads and merge_heads in place of yours, causality "
                                            "passes"}
    assert results["causality"].status == "fail", "diagnosis only"


def test_no_root_cause_when_no_substitution_fixes_it():
    checks, plans, results, outcomes = setup()
    run(checks, plans, results, outcomes, passes_with=[])
    assert results["causality"].root_cause is None and "root_cause" not in results["causality"].to_dict()


def test_no_root_cause_when_two_substitutions_each_fix_it():
    checks, plans, results, outcomes = setup(function_statuses={"split_heads": "fail", "attention_sdpa": "fail"})
    took, seen = run(checks, plans, results, outcomes, passes_with=[("split_heads", "merge_heads"), ("attention",)])
    assert len(seen) == 2 and results["causality"].root_cause is None, "a choice between two would be a guess"


@pytest.mark.parametrize("model_status, functions", [
    ("pass", {"split_heads": "fail"}),  # nothing to explain
    ("timeout", {"split_heads": "fail"}),  # not a failure a substitution is tried on
    ("fail", {"split_heads": "pass", "attention_sdpa": "pass"}),  # no function check failed
    ("fail", {"split_heads": "skipped"}),  # skipped is not failed
])
def test_nothing_is_re_run_without_a_failure_to_explain_and_a_failed_function(model_status, functions):
    checks, plans, results, outcomes = setup(model_status, functions)
    took, seen = run(checks, plans, results, outcomes, passes_with=[("split_heads", "merge_heads")])
    assert took is None and not seen and results["causality"].root_cause is None


def test_training_stages_and_import_errors_are_not_re_run():
    checks, plans, results, outcomes = setup()
    plans["causality"] = [Stage("causality", "causality", {}, fresh=True, needs=("training.run",))]
    assert run(checks, plans, results, outcomes, passes_with=[("split_heads",)])[1] == []
    checks, plans, results, outcomes = setup()
    outcomes["causality"] = StageOutcome("causality", "error", phase="import")
    assert run(checks, plans, results, outcomes, passes_with=[("split_heads",)])[1] == []


def test_a_failed_re_run_leaves_the_results_alone():
    checks, plans, results, outcomes = setup()

    def broken(stages):
        raise RuntimeError("the sandbox did not start")
    took, _ = run(checks, plans, results, outcomes, rerun=broken)
    assert took is not None and results["causality"].root_cause is None


def test_split_or_merge_is_told_apart_by_the_split_heads_outputs():
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    x_split = x.view(2, 3, 2, 4).transpose(1, 2).contiguous()
    plan = [Stage("split_heads", "split_heads", {"x": x, "x_split": x_split}, {"heads": 2})]
    cases = {("split_heads",): {"split": x.reshape(2, 2, 3, 4), "merged": x},
             ("merge_heads",): {"split": x_split, "merged": x_split.reshape(2, 3, 8)},
             ("split_heads", "merge_heads"): {"split": x.reshape(2, 2, 3, 4), "merged": x_split.reshape(2, 3, 8)}}
    for want, tensors in cases.items():
        outcome = StageOutcome("split_heads", "ok", tensors=tensors)
        assert rootcause.split_suspects(plan, {"split_heads": outcome}) == want
    assert rootcause.split_suspects(plan, {"split_heads": StageOutcome("split_heads", "error")}) == \
        ("split_heads", "merge_heads"), "unknown: both"


def test_grader_check_prints_the_root_cause_under_its_check(capsys):
    from grader.cli.check import print_table
    cause = {"check": "split_heads", "evidence": "with a correct split_heads in place of yours, causality passes"}
    report = {"submission": {"name": "s.py"}, "summary": {"fail": 1}, "timings": {},
              "checks": [{"id": "causality", "status": "fail", "message": "leaks", "details": [], "duration_s": 0.1,
                          "root_cause": cause},
                         {"id": "padding", "status": "fail", "message": "leaks", "details": [], "duration_s": 0.1}]}
    print_table(report)
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if "causality" in line and "leaks" in line)
    assert lines[at + 1].strip() == f"root cause: split_heads ({cause['evidence']})"
    assert sum("root cause" in line for line in lines) == 1
