"""What a check is: stages to run in the sandbox, and a verdict computed from their outputs."""
import hashlib
from dataclasses import dataclass, field

import torch

from ..configs import FIRST_ORDINARY, check_config
from ..results import CheckResult, StageOutcome, failed, passed
from ..source import Source


@dataclass
class Stage:
    """One forked child in the sandbox: which probe, on which inputs, with which parameters."""
    key: str
    probe: str
    inputs: dict
    params: dict = field(default_factory=dict)
    input_from: str | None = None
    budget_s: float | None = None  # wall clock for this stage; None takes Limits.stage_s
    # The judge's training: a grader.trainer.Trainer answers the stage's questions while it runs.
    trainer: object | None = None
    # Runs in a second, fresh sandbox, alongside the first once the training run in `needs` has begun: what it
    # needs of that run comes through its grader.feed.Feed as the run gets there, and it is skipped when the run
    # does not finish.
    fresh: bool = False
    needs: tuple = ()
    feed: object | None = None
    # The judge's side of a training or evaluation stage, never sent (the sandbox gets `inputs` only): a run's full
    # data with its targets and each checked step's direction; evaluation's held-out targets (kept), where each
    # causality case changed a token (where), the inputs as sent (sent), the cyclic task's held-out rows (held).
    data: dict | None = None
    directions: dict = field(default_factory=dict)
    kept: dict = field(default_factory=dict)
    where: dict = field(default_factory=dict)
    sent: dict = field(default_factory=dict)
    held: dict | None = None


@dataclass
class Context:
    """What every check may read: the seed, the track and the static source."""
    seed: int
    source: Source
    shared: dict = field(default_factory=dict)  # stages that several checks plan (run once per grading)
    steps: dict = field(default_factory=dict)  # track -> training step budget, where configuration sets one
    # check id -> CheckResult of the checks the judge decided before this one (contract order), so that a message
    # names another check's cause only where that check did not pass
    verdicts: dict = field(default_factory=dict)
    # the phrases of messages that told another check's outcome, each with its form that does not (about())
    asides: list = field(default_factory=list)

    @property
    def track(self) -> str | None:
        """The submission's TRACK, when it is valid."""
        return self.source.track

    def failed(self, check_id: str) -> bool | None:
        """Whether another check of this grading did not pass (True) or passed (False); None: not decided (yet)."""
        result = self.verdicts.get(check_id)
        return None if result is None else result.status != "pass"

    def about(self, phrase) -> str:
        """phrase(ctx), a part of a message that may tell how other checks went, kept with its form when none is
        decided: the service shows that form to a student who may not see one of those checks."""
        asked = Asking(self)
        told, blind = phrase(asked), phrase(Unknowing())
        if told and told != blind:
            self.asides.append({"checks": sorted(asked.asked), "told": told, "blind": blind})
        return told

    def stage_once(self, key: str, make) -> "Stage":
        """The same Stage object for every check that plans it; the judge runs it once."""
        if key not in self.shared:
            self.shared[key] = make()
        return self.shared[key]

    def generator(self, check_id: str) -> torch.Generator:
        """A generator seeded by the grading seed and the check, so checks draw independent inputs. The seed goes
        through sha256: what a generator draws is sent to the sandbox, and a generator's state can be recovered
        from its outputs; a one-way step keeps that from leading back to the grading seed (and so to held-out
        data drawn from another label)."""
        digest = hashlib.sha256(f"{self.seed}\0generator\0{check_id}".encode()).digest()
        return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") % (2 ** 63))

    def public_seed(self, label: str) -> int:
        """A seed for use inside the sandbox, one-way from the secret seed: the sandbox sees it, and from it
        neither the grading seed nor any other label's seed (held-out data, other checks) can be recovered."""
        digest = hashlib.sha256(f"{self.seed}\0{label}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % (2 ** 31)

    def model_params(self, **extra) -> dict:
        """Probe parameters for a model check: track, config and the model's public seed."""
        return {"track": self.track, "config": check_config(self.track), "seed": self.public_seed("model"), **extra}

    def tokens(self, gen: torch.Generator, *shape) -> torch.Tensor:
        """Ordinary token IDs (no specials)."""
        return torch.randint(FIRST_ORDINARY, check_config(self.track)["vocab_size"], shape, generator=gen)


class Verdict:
    """Collects the problems one check finds, then becomes a CheckResult."""

    def __init__(self, check_id: str):
        self.check_id = check_id
        self.problems: list[str] = []
        self.metrics: dict = {}

    def problem(self, message: str | None) -> bool:
        """Record a problem if there is one; return whether there was."""
        if message:
            self.problems.append(message)
        return bool(message)

    def result(self, ok_message: str) -> CheckResult:
        """pass with ok_message, or fail with the first problem as the message and all as details."""
        if not self.problems:
            return passed(self.check_id, ok_message, **self.metrics)
        more = len(self.problems) - 1
        message = self.problems[0] + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
        return failed(self.check_id, message, self.problems, **self.metrics)


def raised_problem(outcome: StageOutcome, fact: str, call: str, expected: str = "ValueError") -> str | None:
    """A message when the probe's recorded call did not raise the expected exception."""
    info = outcome.facts.get(fact)
    if not isinstance(info, dict):
        return f"{call} was not observed"
    got = info.get("raised")
    if got == expected:
        return None
    if got is None:
        return f"{call} should raise {expected} but returned normally"
    return f"{call} should raise {expected} but raised {got}: {str(info.get('message', ''))[:200]}"


def output(outcome: StageOutcome, key: str) -> torch.Tensor | None:
    """A named output tensor, or None if the stage did not return it."""
    return outcome.tensors.get(key)


# What a phrase given to Context.about may read: other checks' outcomes through failed(), and nothing else (so its
# blind form cannot learn them another way).

class Asking:
    """The grading's outcomes, noting which checks a phrase asks about."""

    def __init__(self, ctx: Context):
        self._ctx, self.asked = ctx, set()

    def failed(self, check_id: str) -> bool | None:
        """Context.failed, remembered."""
        self.asked.add(check_id)
        return self._ctx.failed(check_id)


class Unknowing:
    """No other check decided: how a phrase reads without their outcomes."""

    def failed(self, check_id: str) -> None:
        """Never decided."""
        return None
