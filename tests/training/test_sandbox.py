"""training and evaluation through the real judge and sandbox: the references pass within the default budget, the
same seed gives the same metrics, and a leak, a hard-coded answer and an unseeded model are each named."""
import pytest

from tests.support.grading import by_id, explain, grade_text, variant
from grader import configs
from grader.judge import Options, grade_bytes

pytestmark = pytest.mark.slow
CHECKS = ("training", "evaluation")

HARDCODED_REVERSE = '''"""Not a transformer: it reverses the source by index arithmetic; nothing to learn."""
import torch
from torch import nn

TRACK = "reverse"


class Answer(nn.Module):
    def __init__(self, vocab_size, eos_id):
        super().__init__()
        self.vocab_size, self.eos_id = vocab_size, eos_id
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def encode(self, src, src_mask):
        return nn.functional.one_hot(src, self.vocab_size).to(self.bias.dtype)  # (B, S, V)

    def decode(self, tgt, memory, src_mask, cache=None):
        past = 0 if cache is None else int(cache)
        src, lengths = memory.argmax(-1), src_mask.sum(1)  # (B, S), (B,)
        pos = torch.arange(past, past + tgt.shape[1])[None]  # (1, T)
        answer = src.gather(1, (lengths[:, None] - 1 - pos).clamp(min=0))  # (B, T)
        answer = torch.where(pos == lengths[:, None], torch.full_like(answer, self.eos_id), answer)
        answer = torch.where(pos > lengths[:, None], torch.zeros_like(answer), answer)
        logits = 20.0 * nn.functional.one_hot(answer, self.vocab_size).to(self.bias.dtype) + self.bias
        return logits, torch.tensor(past + tgt.shape[1])

    def forward(self, src, tgt, src_mask):
        return self.decode(tgt, self.encode(src, src_mask), src_mask)[0]


def build_model(config):
    return Answer(int(config["vocab_size"]), int(config["eos_id"]))
'''


@pytest.fixture
def short_runs(monkeypatch):
    """Fewer steps: enough to show a leak or a replay mismatch, not to reach the pass thresholds."""
    monkeypatch.setitem(configs.TRAINING["reverse"], "steps", 200)
    monkeypatch.setitem(configs.TRAINING["lm"], "steps", 120)
    monkeypatch.setitem(configs.TRAINING["cyclic"], "steps", 60)


def grade_fresh(text: str, only=CHECKS) -> dict:
    """Grade without the shared cache (the configuration may be patched)."""
    return grade_bytes(text.encode(), "submission.py", Options(only=only))


def results(report: dict) -> list:
    """Every check's status, message and metrics: all but the wall-clock fields."""
    return [{k: c[k] for k in ("id", "status", "message", "metrics", "details")} for c in report["checks"]]


@pytest.mark.parametrize("track", ["reverse", "lm"])
def test_reference_passes_training_and_evaluation_within_the_default_budget(track, reference_text):
    report = grade_text(reference_text(track), only=CHECKS)
    checks = by_id(report)
    assert all(checks[c]["status"] == "pass" for c in CHECKS), explain(report)
    m = checks["training"]["metrics"]
    assert m["loss_ratio"] <= configs.TRAINING_LIMITS[track]["max_loss_ratio"] / 1.5, "a margin below the threshold"
    assert m["steps"] == configs.TRAINING[track]["steps"] and m["torch"] and m["optimizer"]["run_by"] == "the judge"
    assert "seed" not in m and m["config"]["dropout"] == 0.0 and len(m["loss_curve"]) >= 50
    assert len(m["verified_steps"]) >= 3 and m["gradient_max_rel_error"] < 1e-3, "checked, with a wide margin"
    budget = configs.TRAINING[track]["budget_s"]
    assert report["timings"]["stages"]["training.run"] < budget / 2, "well inside the stage's own budget"
    ev = checks["evaluation"]["metrics"]
    if track == "reverse":
        assert ev["token_accuracy"] > 0.85 and ev["exact_match"] > 0.5 and ev["untrained_exact_match"] == 0
        assert ev["teacher_forced_exact"] == ev["exact_match"], "causal + cache-consistent: identical row for row"
    else:
        assert ev["ppl_ratio"] < 0.2 and ev["heldout_loss"] < ev["bigram_loss"] and ev["floor_ratio"] > 1.2
        assert ev["cyclic_accuracy"] > 0.65 and ev["cyclic_accuracy"] == ev["cyclic_accuracy_full_prefix"]
        assert len(ev["samples"]) == len(configs.EVALUATION["lm"]["prompts"])
        assert {"temperature", "top_k", "seed", "max_new_tokens"} <= set(ev["samples"][0])


@pytest.mark.parametrize("track", ["reverse", "lm"])
def test_the_same_seed_gives_identical_metrics(track, reference_text, short_runs):
    first, second = grade_fresh(reference_text(track)), grade_fresh(reference_text(track))
    assert results(first) == results(second)


def test_a_causal_leak_gets_a_suspiciously_low_loss_and_no_greedy_match(short_runs):
    text = variant("reverse", "    causal = key_pos <= query_pos  # (Tq, Tk)\n",
                   "    causal = key_pos <= query_pos + 1  # (Tq, Tk)\n")
    checks = by_id(grade_fresh(text))
    assert checks["training"]["status"] == "fail" and "suspiciously low" in checks["training"]["message"]
    assert checks["evaluation"]["status"] == "fail" and "causal leak" in checks["evaluation"]["message"]
    m = checks["evaluation"]["metrics"]
    assert m["teacher_forced_exact"] > 0.9 and m["exact_match"] < 0.1


def test_a_text_model_with_a_causal_leak_goes_below_the_generators_entropy(short_runs):
    text = variant("lm", "    causal = key_pos <= query_pos  # (Tq, Tk)\n",
                   "    causal = key_pos <= query_pos + 1  # (Tq, Tk)\n")
    checks = by_id(grade_fresh(text))
    assert checks["training"]["status"] == "fail" and "entropy" in checks["training"]["message"]
    assert checks["evaluation"]["status"] == "fail" and "causal model" in checks["evaluation"]["message"]
    assert checks["evaluation"]["metrics"]["floor_ratio"] < 0.8


def test_a_leak_only_when_the_batch_is_padded_is_caught_on_the_held_out_inputs():
    """tests/integrity/models/peek_when_padded_lm.py sees the next real token only when its batch holds padding: its
    training batches hold none, so only evaluation's padded causality cases on real held-out rows can show it."""
    from tests.integrity.test_model_sensitivity import submission
    report = grade_text(submission("peek_when_padded_lm"), only=CHECKS)
    evaluation = by_id(report)["evaluation"]
    assert evaluation["status"] == "fail", explain(report)
    leaks = [p for p in evaluation["details"] if "reads tokens after the one it predicts" in p]
    assert leaks and "padding)" in leaks[0], evaluation["details"]


def test_a_hard_coded_answer_fails_evaluation_because_the_untrained_model_solves_it(short_runs):
    checks = by_id(grade_fresh(HARDCODED_REVERSE))
    assert checks["training"]["status"] == "fail" and "before the first step" in checks["training"]["message"]
    assert checks["evaluation"]["status"] == "fail", checks["evaluation"]
    assert "untrained model already solves" in checks["evaluation"]["message"]
    assert checks["evaluation"]["metrics"]["untrained_exact_match"] == 1.0


def test_randomness_the_seed_does_not_control_fails_the_fresh_sandbox_check(short_runs):
    text = variant("reverse", "        return self.decode(tgt, self.encode(src, src_mask), src_mask)[0]\n",
                   "        logits = self.decode(tgt, self.encode(src, src_mask), src_mask)[0]\n"
                   "        if self.training:  # noise from a clock-seeded generator\n"
                   "            gen = torch.Generator().manual_seed(__import__('time').time_ns() % 2**31)\n"
                   "            logits = logits + 0.01 * torch.randn(logits.shape, generator=gen)\n"
                   "        return logits\n")
    training = by_id(grade_fresh(text, only=("training",)))["training"]
    # a fresh sandbox gives other logits at the same weights on the same batch: the first checked step says so
    assert training["status"] == "fail" and "do not follow from the weights" in training["message"], training
    assert training["message"].startswith("step 0:")
