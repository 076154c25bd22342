"""Non-finite outputs: where the judge compares the student's logits with the student's own (cached against
full prefix, reloaded against saved, changed input against base), +inf never equals +inf and NaN never NaN.

A model whose logits are ±inf or NaN used to pass every "these two must be equal" check against itself.
"""
import pytest

from .integrity_support import BACKENDS, graded_on, reference

pytestmark = pytest.mark.slow

LOGITS = "        logits = self.head(self.norm(x))  # (B, T, V)\n"
ATTACKED = ("causality", "padding", "kv_cache", "checkpoint_reload")
# each variant's code, the checks it must fail, and what their messages must say ('': any reason)
VARIANTS = {
    "signed_infinity": (LOGITS + '        logits = torch.where(logits > 0, float("inf"), float("-inf"))\n',
                        ATTACKED, ""),
    "nan_in_places": (LOGITS + '        logits = logits.masked_fill(logits > 0.5, float("nan"))\n', ATTACKED, ""),
    "all_infinite": (LOGITS + '        logits = logits + float("inf")\n', ATTACKED, ""),
    # finite without a cache: kv_cache's full-prefix logits pass their own finiteness test, so only the comparison
    # with the cached ones (NaN, whose difference is NaN and so "not larger than the tolerance") can refuse them
    "nan_from_the_cache": (LOGITS + '        if cache is not None:\n'
                                    '            logits = torch.full_like(logits, float("nan"))\n', ("kv_cache",),
                           "a non-finite value never counts as equal"),
}


def poisoned(name: str) -> str:
    text = reference("lm")
    assert text.count(LOGITS) == 1
    return text.replace(LOGITS, VARIANTS[name][0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_nonfinite_logits_earn_no_equality_check(name, backend):
    """Every check a variant attacks fails it; where only the comparison meets the NaN, it names it non-finite."""
    _, attacked, said = VARIANTS[name]
    report = graded_on(poisoned(name), backend, ("split_heads", *attacked))
    got = {c["id"]: c for c in report["checks"]}
    assert got["split_heads"]["status"] == "pass", got["split_heads"]
    passed = {cid: got[cid]["message"] for cid in attacked if got[cid]["status"] == "pass"}
    assert not passed, f"checks passed on non-finite logits: {passed}"
    unsaid = {cid: got[cid]["message"] for cid in attacked if said not in got[cid]["message"]}
    assert not unsaid, f"not refused for its non-finite values: {unsaid}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_reference_keeps_these_checks(backend):
    report = graded_on(reference("lm"), backend, ("split_heads", *ATTACKED))
    assert {c["id"]: c["status"] for c in report["checks"]} == dict.fromkeys(("split_heads", *ATTACKED), "pass"), \
        [(c["id"], c["message"]) for c in report["checks"] if c["status"] != "pass"]


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_compare_never_calls_a_nonfinite_value_equal(value):
    """The unit property the checks above rely on (the checks also name non-finite outputs on their own)."""
    import torch

    from grader.compare import mismatch
    a = torch.tensor([[0.0, value]], dtype=torch.float64)
    miss = mismatch(a, a.clone(), atol=1e9, rtol=1e9, axes=("row", "col"))
    assert miss is not None and miss.index == (0, 1) and "never counts as equal" in miss.describe("logits")
