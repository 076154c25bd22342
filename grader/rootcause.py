"""Root cause by substitution: name the contract function that a model-level failure comes from, with evidence.

When a model-level check fails and a contract function's own check failed too, the judge runs the failing check's
stages again with its reference version of that function in the submission's module (the harness sets the module's
attribute after the import: grader/harness/reference_parts.py). If the check then passes, its result gets
root_cause = {"check": <the function's check>, "evidence": <one sentence>}.

Diagnosis only: statuses and points stay as graded, so it may run in the untrusted sandbox (a submission that games a
substituted run can only change what it is told, never what it earns). Nothing is said where no single substitution
makes the check pass (several would, or none does: the cause is elsewhere, or the model does not call the module's
function), and only a function check that failed can be named. The re-runs are all in one extra sandbox. Training
and evaluation are not re-run (each would cost a training run), so they are never attributed.
"""
import logging
import time
from dataclasses import replace

import torch

from .registry import check_registry

log = logging.getLogger(__name__)

# A contract function's check -> the functions it covers (each one the harness can substitute): their FUNCTIONS.
COVERS = {c.id: c.functions for c in check_registry().values() if c.functions}
DIAGNOSED = ("fail", "error")  # a model-level check's statuses that a substitution may explain
NOT_FAILED = ("pass", "skipped")  # a function check with one of these is never named
MIN_BUDGET_S = 5.0  # a substituted stage's time: this, or 4 times what the stage took, within the stage limit


def model_level(check, plan, outcomes) -> bool:
    """The check builds the model, its stages are cheap to run again (no training, no fresh sandbox), and the
    submission got past its import (a substitution happens after the import, so it cannot change an import error)."""
    if not getattr(check, "NEEDS_TRACK", False) or not plan:
        return False
    if any(s.trainer is not None or s.fresh or s.needs for s in plan):
        return False
    return not any(outcomes.get(s.key) is not None and outcomes[s.key].status != "ok"
                   and outcomes[s.key].phase == "import" for s in plan)


def same(got, want) -> bool:
    """got is a tensor exactly equal to want."""
    return (isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(want.shape)
            and bool(torch.equal(got.to(want.dtype), want)))


def split_suspects(plan, outcomes) -> tuple:
    """Of split_heads and merge_heads, the ones the split_heads check's own outputs show wrong (both when unknown)."""
    both = COVERS["split_heads"]
    stage = plan[0] if plan else None
    outcome = outcomes.get(stage.key) if stage is not None else None
    if outcome is None or outcome.status != "ok" or not isinstance(stage.inputs, dict):
        return both
    x, x_split = stage.inputs.get("x"), stage.inputs.get("x_split")
    if x is None or x_split is None:
        return both
    wrong = tuple(name for name, got, want in (("split_heads", outcome.tensors.get("split"), x_split),
                                               ("merge_heads", outcome.tensors.get("merged"), x))
                  if not same(got, want))
    return wrong or both


def suspects(plans, results, outcomes) -> dict:
    """failed function check id -> the functions to substitute for it."""
    failed = [fid for fid in COVERS if fid in plans and fid in results and results[fid].status not in NOT_FAILED]
    return {fid: split_suspects(plans[fid], outcomes) if fid == "split_heads" else COVERS[fid] for fid in failed}


def settled(check, plans, results, outcomes) -> bool:
    """A decided check's result that attribute() will never touch: it did not fail, it is not model-level, or every
    contract function check of this grading is decided and did not fail (so none can be named). grader/live.py sends
    a verdict before the diagnosis only when this holds."""
    if results[check.ID].status not in DIAGNOSED or not model_level(check, plans[check.ID], outcomes):
        return True
    return all(fid in results and results[fid].status in NOT_FAILED for fid in COVERS if fid in plans)


def substituted(plan, names, outcomes, stage_s: float) -> list:
    """The plan's stages under new keys, with the functions to substitute in their params."""
    tag = "@" + "+".join(names)
    keys = {s.key for s in plan}
    stages = []
    for s in plan:
        took = outcomes[s.key].duration_s if s.key in outcomes else 0.0
        limit = min(stage_s, s.budget_s) if s.budget_s is not None else stage_s
        stages.append(replace(s, key=s.key + tag, params={**s.params, "substitute": list(names)},
                              input_from=s.input_from + tag if s.input_from in keys else s.input_from,
                              budget_s=min(limit, max(MIN_BUDGET_S, 4 * took))))
    return stages


def evidence(names, check_id: str) -> str:
    """The one sentence that says what the re-run showed."""
    return f"with a correct {' and '.join(names)} in place of yours, {check_id} passes"


def attribute(ctx, checks, plans, results, outcomes, stage_s: float, decide, rerun) -> float | None:
    """Set root_cause on each model-level result that one substitution turns into a pass.

    decide: the judge's decide(check, ctx, plan, outcomes, graded); rerun(stages) -> outcomes by stage key, the stages
    run in one extra sandbox. Returns the seconds the diagnosis took, None when there was nothing to diagnose.
    """
    candidates = suspects(plans, results, outcomes)
    targets = [c for c in checks if c.ID in plans and results[c.ID].status in DIAGNOSED
               and model_level(c, plans[c.ID], outcomes)]
    if not candidates or not targets:
        return None
    started = time.monotonic()
    runs = {(c.ID, fid): substituted(plans[c.ID], names, outcomes, stage_s)
            for c in targets for fid, names in candidates.items()}
    try:
        got = rerun([s for stages in runs.values() for s in stages])
    except Exception:  # a diagnosis never costs a grading its result
        log.exception("the root-cause re-run failed; no root causes given")
        return round(time.monotonic() - started, 3)
    for check in targets:
        plan, fixed = plans[check.ID], []
        for fid, names in candidates.items():
            renamed = {s.key: got.get(sub.key) for s, sub in zip(plan, runs[(check.ID, fid)])}
            if any(o is None for o in renamed.values()):
                continue
            # the check's own verdict on the substituted run's outputs, under the original stage keys
            if decide(check, ctx, plan, renamed, set(plans)).status == "pass":
                fixed.append((fid, names))
        if len(fixed) == 1:  # two substitutions that each fix it would be a guess between them
            fid, names = fixed[0]
            results[check.ID].root_cause = {"check": fid, "evidence": evidence(names, check.ID)}
    return round(time.monotonic() - started, 3)
