"""The check ids and metric names, read from the checks' source so the web and the CLI never import torch."""
import ast
from functools import lru_cache
from pathlib import Path

CHECKS_DIR = Path(__file__).resolve().parent / "checks"


def _constant(tree: ast.Module, name: str):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    return None


@lru_cache(maxsize=1)
def check_registry() -> dict[str, tuple]:
    """check id -> metric names, in contract order: grader.checks without importing it (it imports torch)."""
    modules = _constant(ast.parse((CHECKS_DIR / "__init__.py").read_text()), "CHECKS")
    if modules is None:
        raise RuntimeError("grader/checks/__init__.py no longer defines CHECKS")
    registry = {}
    for elt in modules.elts:
        tree = ast.parse((CHECKS_DIR / f"{elt.id}.py").read_text())
        check_id, metrics = _constant(tree, "ID"), _constant(tree, "METRICS")
        if check_id is None:
            raise RuntimeError(f"grader/checks/{elt.id}.py defines no ID")
        registry[ast.literal_eval(check_id)] = tuple(ast.literal_eval(metrics)) if metrics is not None else ()
    return registry


def check_ids() -> tuple[str, ...]:
    """grader.checks.ALL_IDS, without the import."""
    return tuple(check_registry())
