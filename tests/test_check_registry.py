"""Every registered check has everything docs/adding-a-check.md asks of it: its declaration, plan and verdict, a probe
the harness knows, a rubric item, a row in docs/contract.md and docs/students.md, a known-bad example and a test.

Read from the files (ast, tomllib, the known-bad table): no torch, so this runs in seconds.
"""
import ast
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from grader.registry import CHECKS_DIR, FIELDS, check_registry, declared

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = check_registry()
IDS = list(REGISTRY)
THIS = Path(__file__).name


def module_tree(check_id: str) -> ast.Module:
    return ast.parse((CHECKS_DIR / f"{REGISTRY[check_id].module}.py").read_text(encoding="utf-8"))


def harness_probes() -> set:
    """The probe names grader/harness/probes.py registers: PROBES = {...} and PROBES.update({...})."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / "grader" / "harness" / "probes.py").read_text(encoding="utf-8"))):
        table = None
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PROBES" for t in node.targets):
            table = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
              and getattr(node.func.value, "id", None) == "PROBES" and node.args):
            table = node.args[0]
        if isinstance(table, ast.Dict):
            names |= {k.value for k in table.keys if isinstance(k, ast.Constant)}
    return names


def probes_planned(check_id: str) -> set:
    """The probe names the check's module puts in its stages: Stage(key, "probe", ...)."""
    return {node.args[1].value for node in ast.walk(module_tree(check_id))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Stage" and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)}


def rubric_checks() -> set:
    doc = tomllib.loads((ROOT / "rubric" / "capstone.toml").read_text(encoding="utf-8"))
    return {i["check"] for c in doc["categories"] for i in c["items"] if "check" in i}


def table_rows(doc: str, heading: str) -> set:
    """The check ids in the first column of the table under `heading` in docs/<doc>."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n#", 1)[0] if heading in text else ""
    return set(re.findall(r"^\| `([a-z_0-9]+)` \|", section, re.MULTILINE))


def known_bad_targets() -> set:
    """The check ids some bug in submissions/known_bad.py must fail."""
    spec = importlib.util.spec_from_file_location("known_bad", ROOT / "submissions" / "known_bad.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set().union(*(bug.fails for bug in module.KNOWN_BAD))


def files_naming(check_id: str) -> list:
    """Test files (not this one) that name the check as a string."""
    return [p for p in (ROOT / "tests").rglob("test_*.py")
            if p.name != THIS and f'"{check_id}"' in p.read_text(encoding="utf-8")]


def test_the_registry_has_the_contract_checks_in_order():
    assert IDS[:3] == ["split_heads", "attention_sdpa", "rope"] and IDS[-2:] == ["training", "evaluation"], IDS
    assert [c.order for c in REGISTRY.values()] == sorted(c.order for c in REGISTRY.values())


@pytest.mark.parametrize("check_id", IDS)
def test_module_declares_every_field_and_defines_plan_and_verdict(check_id):
    path = CHECKS_DIR / f"{REGISTRY[check_id].module}.py"
    fields = declared(path)
    assert set(FIELDS) <= set(fields), f"{path.name} does not declare {sorted(set(FIELDS) - set(fields))}"
    check = REGISTRY[check_id]
    assert check.title.strip() and check.hint.strip(), f"{check_id}: TITLE and HINT say something"
    functions = {n.name for n in module_tree(check_id).body if isinstance(n, ast.FunctionDef)}
    assert {"plan", "verdict"} <= functions, f"{path.name} defines plan(ctx) and verdict(ctx, stages, outcomes)"


@pytest.mark.parametrize("check_id", IDS)
def test_its_probes_are_in_the_harness(check_id):
    planned = probes_planned(check_id)
    assert planned, f"{check_id} plans no Stage(key, probe, ...): the sandbox would never run it"
    unknown = planned - harness_probes()
    assert not unknown, f"{check_id} plans probes grader/harness/probes.py does not register in PROBES: {unknown}"


@pytest.mark.parametrize("check_id", IDS)
def test_a_packaged_rubric_item_scores_it(check_id):
    assert check_id in rubric_checks(), f'rubric/capstone.toml has no item with check = "{check_id}"'


@pytest.mark.parametrize("doc, heading", [("contract.md", "## 4. What each check requires"),
                                          ("students.md", "## What is checked, and what a failure usually means")])
@pytest.mark.parametrize("check_id", IDS)
def test_the_docs_describe_it(check_id, doc, heading):
    assert check_id in table_rows(doc, heading), f"docs/{doc}, {heading!r}: no row | `{check_id}` |"


@pytest.mark.parametrize("check_id", IDS)
def test_a_known_bad_example_fails_it(check_id):
    assert check_id in known_bad_targets(), \
        f"no bug in submissions/known_bad.py lists {check_id!r} in fails (tests/test_known_bad.py grades each)"


@pytest.mark.parametrize("check_id", IDS)
def test_a_test_names_it(check_id):
    assert files_naming(check_id), f'no tests/**/test_*.py names "{check_id}"'


def test_the_result_page_shows_each_failed_checks_hint():
    from grader.app.pages.results import check_rows
    report = {"checks": [{"id": c, "status": s} for c in IDS for s in ("fail", "pass")]}
    rows = check_rows(report, {})
    for row in rows:
        want = REGISTRY[row["id"]].hint if row["status"] == "fail" else None
        assert row["look_at"] == want, f"{row['id']} {row['status']}: look_at {row['look_at']!r}"


def test_grader_checks_follows_the_registry():
    """The modules the judge runs are the registry's, in its order, with the same declarations (imports torch)."""
    from grader.checks import CHECKS
    assert [c.ID for c in CHECKS] == IDS
    for module in CHECKS:
        check = REGISTRY[module.ID]
        assert (module.TITLE, module.HINT, module.NEEDS_TRACK, tuple(module.METRICS)) == \
            (check.title, check.hint, check.needs_track, check.metrics), module.ID
