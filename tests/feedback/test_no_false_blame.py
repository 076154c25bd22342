"""No message blames a check that passed: training's and evaluation's leak messages name the causal mask or the cache
only where causality or kv_cache did not pass in the same grading (the judge decides them first: Context.verdicts)."""
import pytest

from grader.checks import evaluation, training
from grader.checks.base import Context
from grader.configs import DEFAULT_SEED
from grader.results import CheckResult
from grader.source import read_source
from tests.support.grading import REFERENCES, by_id, explain, grade_text, variant

# A KV-cache position bug (Track A: cached decoding restarts RoPE at 0): causality passes, kv_cache fails, and greedy
# decoding (which uses the cache) falls behind teacher forcing in training and evaluation.
CACHE_POSITIONS = ("        positions = torch.arange(past, past + length, device=tgt.device)  # (T,)\n",
                   "        positions = torch.arange(length, device=tgt.device)  # (T,)\n")


def context(**statuses) -> Context:
    ctx = Context(DEFAULT_SEED, read_source(REFERENCES["reverse"].read_bytes()))
    ctx.verdicts.update({cid: CheckResult(cid, status, "") for cid, status in statuses.items()})
    return ctx


@pytest.mark.parametrize("statuses, names, leaves_out", [
    ({"causality": "pass", "kv_cache": "fail"}, ["see kv_cache"], ["causal mask", "causality"]),
    ({"causality": "fail", "kv_cache": "pass"}, ["causal mask", "see causality"], ["kv_cache"]),
    ({"causality": "fail", "kv_cache": "fail"}, ["see causality", "see kv_cache"], []),
    ({"causality": "pass", "kv_cache": "pass"}, ["BOS/EOS shift"], ["causal mask", "see "]),
    ({"causality": "pass"}, ["cached decoding"], ["causal mask"]),
    ({}, ["check the causal mask"], ["see "]),  # neither graded here: the usual suspects, no check named
], ids=["cache-bug", "causal-leak", "both", "neither", "causality-only", "not-graded"])
def test_the_gap_between_teacher_forcing_and_greedy_names_only_checks_that_did_not_pass(statuses, names, leaves_out):
    said = training.gap_cause(context(**statuses))
    for text in names:
        assert text in said, f"with {statuses} the message should say {text!r}: {said!r}"
    for text in leaves_out:
        assert text not in said, f"with {statuses} the message must not say {text!r}: {said!r}"


def test_a_phrase_that_tells_how_other_checks_went_keeps_its_form_that_does_not():
    """The service shows the blind form to a student who may not see causality or kv_cache (grader/app/visibility)."""
    ctx = context(causality="pass", kv_cache="fail")
    told = ctx.about(training.gap_cause)
    blind = training.gap_cause(context())
    assert told == training.gap_cause(ctx) and "see kv_cache" in told
    assert ctx.asides == [{"checks": ["causality", "kv_cache"], "told": told, "blind": blind}]
    assert "see " not in blind and "passed" not in blind and "causal mask" in blind and "cache" in blind, blind
    same = context(causality="pass", kv_cache="fail")
    same.about(lambda c: "no other check asked")
    assert same.asides == [], "a phrase that reads the same either way needs no aside"


def test_evaluation_keeps_its_message_when_neither_check_was_graded():
    assert "a causal leak" in evaluation.leak_or_cache(context())
    assert "causal" not in evaluation.leak_or_cache(context(causality="pass", kv_cache="fail"))


@pytest.mark.slow
def test_a_kv_cache_position_bug_is_not_blamed_on_the_causal_mask():
    report = grade_text(variant("reverse", *CACHE_POSITIONS),
                        only=("causality", "kv_cache", "training", "evaluation"))
    checks = by_id(report)
    assert checks["causality"]["status"] == "pass" and checks["kv_cache"]["status"] == "fail", explain(report)
    for cid in ("training", "evaluation"):
        message = checks[cid]["message"]
        assert checks[cid]["status"] == "fail", f"{cid} should fail (greedy decoding uses the cache)\n{explain(report)}"
        assert "causal mask" not in message and "causal leak" not in message and "see causality" not in message, \
            f"{cid} blames the causal mask, but causality passed: {message}"
        assert "see kv_cache" in message, f"{cid} should point at kv_cache, which failed: {message}"
        asides = checks[cid]["asides"]  # the same message for a student who may not see causality or kv_cache
        assert asides and all(a["told"] in message for a in asides), asides
        blind = [a["blind"] for a in asides]
        assert not any("see kv_cache" in b or "passed" in b for b in blind), blind
    # each check carries the asides its own verdict wrote: training's phrase, worded as evaluation's, is not
    # evaluation's (its blind form would be training's)
    assert [a["blind"] for a in checks["training"]["asides"]] == [training.gap_cause(context())]
    assert training.gap_cause(context()) not in [a["blind"] for a in checks["evaluation"]["asides"]]


@pytest.mark.parametrize("status, why", [("oom", "ran out of memory"), ("error", "raised an error")])
def test_a_skipped_check_tells_how_its_source_ended_only_to_who_may_read_that_check(status, why):
    """Evaluation skipped because training's run failed says how it failed; a student who may not read training is
    told only that it did not finish (the skip itself says that much), and one who may read it (the control) all."""
    from grader.app.visibility import Visibility, told_as_readable
    from grader.judge import skipped
    from grader.results import StageOutcome
    result = skipped("evaluation", "training.run", {"training.run": StageOutcome("training.run", status)}).to_dict()
    assert result["message"] == f"not run: it needs what training produces (training.run), which {why}; see training"
    hidden = told_as_readable(result, Visibility(checks={"training": "hidden"}))
    assert hidden["message"] == "not run: it needs what training produces (training.run), which did not finish"
    assert "asides" not in hidden
    assert told_as_readable(result, Visibility(checks={"training": "summary"}))["message"] == result["message"]
