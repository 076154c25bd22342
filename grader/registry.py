"""The check registry: every check's declaration, read from its module's source so the web, the CLI and the rubric
never import torch.

A check is a module grader/checks/<id>.py that declares, as literal constants at its top, ID, TITLE, HINT, ORDER,
NEEDS_TRACK and METRICS (and FUNCTIONS, when it tests contract functions on their own), and defines plan(ctx) (the stages its probes run in the sandbox) and verdict(ctx, stages,
outcomes). Modules without an ID (base, batches, sensitivity) are helpers. docs/adding-a-check.md has the rest.
"""
import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CHECKS_DIR = Path(__file__).resolve().parent / "checks"
FIELDS = ("ID", "TITLE", "HINT", "ORDER", "NEEDS_TRACK", "METRICS")
OPTIONAL = {"FUNCTIONS": ()}  # declared by the checks that test contract functions on their own


@dataclass(frozen=True)
class Check:
    """One check's declaration."""
    id: str
    title: str  # what a pass establishes, in a few words
    hint: str  # where to look first when it fails (the result page's "what to look at")
    order: int  # its place in reports, pages and lists: the contract's order
    needs_track: bool  # True: it builds the model, so it runs only on a submission that declares its TRACK
    metrics: tuple[str, ...]  # the metrics it may report (rubric thresholds are validated against them)
    module: str  # its module in grader.checks, named after the id (read_check insists)
    functions: tuple[str, ...] = ()  # the contract functions it tests on their own (root causes name them)


def declared(path: Path) -> dict:
    """The literal top-level constants of a module's source (the fields it declares), by name."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and (target.id in FIELDS or target.id in OPTIONAL):
                    try:
                        found[target.id] = ast.literal_eval(node.value)
                    except ValueError:
                        raise RuntimeError(f"{path}: {target.id} must be a literal (the registry reads it "
                                           "without importing the module)") from None
    return found


def read_check(path: Path, fields: dict) -> Check:
    """A Check from one module's declared fields; RuntimeError names a missing or ill-typed one."""
    missing = [f for f in FIELDS if f not in fields]
    if missing:
        raise RuntimeError(f"{path} declares ID but not {', '.join(missing)} (docs/adding-a-check.md)")
    fields = {**OPTIONAL, **fields}
    kinds = {"ID": str, "TITLE": str, "HINT": str, "ORDER": int, "NEEDS_TRACK": bool, "METRICS": tuple,
             "FUNCTIONS": tuple}
    for name, kind in kinds.items():
        if not isinstance(fields[name], kind) or (kind is int and isinstance(fields[name], bool)):
            raise RuntimeError(f"{path}: {name} must be a {kind.__name__}, not {fields[name]!r}")
    if fields["ID"] != path.stem:
        raise RuntimeError(f"{path}: ID {fields['ID']!r} differs from the module's name")
    return Check(id=fields["ID"], title=fields["TITLE"], hint=fields["HINT"], order=fields["ORDER"],
                 needs_track=fields["NEEDS_TRACK"], metrics=tuple(fields["METRICS"]), module=path.stem,
                 functions=tuple(fields["FUNCTIONS"]))


@lru_cache(maxsize=1)
def check_registry() -> dict[str, Check]:
    """check id -> its declaration, in contract order (ORDER): grader.checks without importing it (it imports torch)."""
    checks = []
    for path in sorted(CHECKS_DIR.glob("*.py")):
        fields = declared(path)
        if "ID" in fields:
            checks.append(read_check(path, fields))
    checks.sort(key=lambda c: c.order)
    for a, b in zip(checks, checks[1:]):
        if a.order == b.order:
            raise RuntimeError(f"checks {a.id} and {b.id} share ORDER = {a.order}")
    return {c.id: c for c in checks}


def check_ids() -> tuple[str, ...]:
    """Every check id, in contract order."""
    return tuple(check_registry())


def hint(check_id: str) -> str | None:
    """Where to look first when the check fails (None for an id the registry does not know)."""
    check = check_registry().get(check_id)
    return check.hint if check else None
