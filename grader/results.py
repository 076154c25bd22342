"""The records a grading run produces: stage outcomes from the sandbox, check results from the judge."""
from dataclasses import asdict, dataclass, field

# Every status a check can end with, in the order a report lists them.
CHECK_STATUSES = ("pass", "fail", "error", "timeout", "oom", "crash", "skipped")


@dataclass
class StageOutcome:
    """What the sandbox said about one stage: a status, the tensors it returned and what it printed."""
    stage: str
    status: str  # ok, error, violation, timeout, oom, crash, missing
    message: str = ""
    tensors: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    traceback: list = field(default_factory=list)
    phase: str = ""
    duration_s: float = 0.0
    stdout: str = ""
    stdout_bytes: int = 0


@dataclass
class CheckResult:
    """One check's verdict: status, a message a student can act on, and the measured numbers."""
    id: str
    status: str
    message: str
    metrics: dict = field(default_factory=dict)
    details: list = field(default_factory=list)
    duration_s: float = 0.0
    stdout: str = ""
    # {"check": a contract function's check id, "evidence": one sentence}: the failure goes away when the judge's
    # version of that function stands in for the student's (grader/rootcause.py); diagnosis only, never points
    root_cause: dict | None = None
    # [{"checks": [ids], "told": a phrase of the message or details that tells how those checks went, "blind": the
    # same phrase without their outcomes}]: what the service shows a student who may not see one of those checks
    asides: list = field(default_factory=list)

    def __post_init__(self):
        if self.status not in CHECK_STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_dict(self) -> dict:
        """JSON-ready form (root_cause and asides only where there are)."""
        out = asdict(self)
        if out["root_cause"] is None:
            del out["root_cause"]
        if not out["asides"]:
            del out["asides"]
        return out


def passed(check_id: str, message: str, **metrics) -> CheckResult:
    """A passing result."""
    return CheckResult(check_id, "pass", message, metrics=metrics)


def failed(check_id: str, message: str, details=(), **metrics) -> CheckResult:
    """A failing result."""
    return CheckResult(check_id, "fail", message, metrics=metrics, details=list(details))
