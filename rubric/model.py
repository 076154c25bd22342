"""The rubric's records: categories of items, partial-credit rules and course policy, all immutable."""
from dataclasses import dataclass, field
from datetime import datetime

KINDS = ("auto", "manual")
VISIBILITIES = ("visible", "hidden")
TRACKS = ("reverse", "lm")
PERIODS = ("day", "week", "term")
COUNTS = ("best", "last")


class RubricError(ValueError):
    """A rubric file that cannot be used; the message names every problem and where it is."""

    def __init__(self, message: str, problems=()):
        super().__init__(message)
        self.problems = list(problems) or [message]


@dataclass(frozen=True)
class Rule:
    """Credit from one measured value: full credit at `full`, none at `zero`, linear in between."""
    metrics: tuple  # names of the check's metrics, summed
    full: float
    zero: float
    per: str | None = None  # divide the sum by this metric, making it a fraction
    track: str | None = None  # applies to this track only (None: both)
    weight: float = 1.0  # share among the item's rules

    @property
    def label(self) -> str:
        """How the measured value is formed, for notes: '(a+b)/c'."""
        summed = "+".join(self.metrics)
        if not self.per:
            return summed
        return f"({summed})/{self.per}" if len(self.metrics) > 1 else f"{summed}/{self.per}"


@dataclass(frozen=True)
class Item:
    """One line of the rubric: an automatic check's points, or a manual item the instructor grades."""
    id: str
    kind: str
    points: float
    title: str
    description: str = ""
    check: str | None = None
    visibility: str = "visible"
    partial: tuple = ()  # Rules
    fail_cap: float = 1.0  # most of the points a failing check can earn through partial credit


@dataclass(frozen=True)
class Category:
    """A weighted part of the grade, drawing on several items."""
    id: str
    title: str
    weight: float
    visibility: str
    items: tuple


@dataclass(frozen=True)
class Policy:
    """Course rules around scores: attempts, lateness and which submission counts."""
    attempts: int = 0  # per student per period; 0 means unlimited
    period: str = "day"
    timezone: str = "UTC"
    deadline: datetime | None = None  # timezone-aware
    grace_minutes: float = 0.0
    late_per_day: float = 0.0  # fraction of the score lost per started day late
    late_max: float = 1.0  # the most the late penalty can take, as a fraction
    counts: str = "best"


@dataclass(frozen=True)
class Rubric:
    """A loaded, validated rubric: version, categories of items and the course policy."""
    version: str
    digest: str  # sha256 of the file's bytes, so two files with the same version can be told apart
    title: str
    total: float
    decimals: int
    categories: tuple
    policy: Policy = field(default_factory=Policy)
    source: str = ""

    def items(self):
        """Every (category, item) pair in file order."""
        return [(c, i) for c in self.categories for i in c.items]

    def item(self, item_id: str) -> Item | None:
        """The item with this id, or None."""
        return next((i for _, i in self.items() if i.id == item_id), None)
