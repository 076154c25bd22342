"""The import rules of the layout (issue 18), read from the source with ast, imports inside functions included."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The packages that must not import each other in a circle; grader.judge is one module.
PACKAGES = ("grader.app", "grader.cli", "grader.client", "grader.judge", "worker", "rubric")


def module_name(path: Path) -> str:
    """grader/app/pages/common.py -> grader.app.pages.common; a package's __init__.py -> the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) for every import in the file, at any depth; `from a import b` gives a and a.b."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names if alias.name != "*"]
    return found


def python_files(top: str) -> list[Path]:
    """The .py files of a package folder (or the one module)."""
    path = ROOT / top.replace(".", "/")
    return sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_app_never_imports_the_worker():
    found = [f"{where(path, line)} imports {module}" for path in python_files("grader.app")
             for module, line in imports(path) if within(module, "worker")]
    assert not found, ("grader/app reaches Celery through grader/app/queue.py and never imports worker/ "
                       "(worker/ imports the app):\n" + "\n".join(found))


def test_no_web_addenda_modules():
    addenda = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "grader").rglob("*_web.py"))
    assert not addenda, f"a module is named by what it adds, not after the web pages that came later: {addenda}"


def test_rubric_source_imports_neither_torch_nor_the_checks():
    found = [f"{where(path, line)} imports {module}" for path in python_files("rubric")
             for module, line in imports(path) if within(module, "torch") or within(module, "grader.checks")]
    assert not found, ("rubric/ is data and arithmetic: it receives the check registry as an argument "
                       "(grader.registry) instead of importing grader.checks and torch:\n" + "\n".join(found))


LOAD_WITHOUT_TORCH = """
import sys
import rubric
from grader.registry import check_registry
loaded = rubric.load_rubric(checks=check_registry())
heavy = sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "grader.checks")))
print(loaded.version, len(loaded.categories))
print(" ".join(heavy))
"""


def test_the_packaged_rubric_loads_without_torch():
    done = subprocess.run([sys.executable, "-c", LOAD_WITHOUT_TORCH], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"loading the packaged rubric with the registry failed:\n{done.stderr}"
    version, heavy = (done.stdout.splitlines() + ["", ""])[:2]
    assert version.strip(), f"no rubric came back: {done.stdout!r}"
    assert not heavy.strip(), f"`import rubric` and loading the packaged rubric imported: {heavy}"


def package_graph() -> dict[str, dict[str, str]]:
    """package -> {package it imports: where, first seen}, over every import of every file of each package."""
    graph = {package: {} for package in PACKAGES}
    for package in PACKAGES:
        for path in python_files(package):
            for module, line in imports(path):
                target = next((p for p in PACKAGES if within(module, p)), None)
                if target and target != package:
                    graph[package].setdefault(target, where(path, line))
    return graph


def find_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search, packages in a fixed order)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in graph:
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b": "x"}, "b": {}}, None),
    ({"a": {"b": "x"}, "b": {"a": "y"}}, ["a", "b", "a"]),
    ({"a": {"b": "x"}, "b": {"c": "y"}, "c": {"b": "z"}}, ["b", "c", "b"]),
])
def test_find_cycle_names_the_cycle(graph, expected):
    assert find_cycle(graph) == expected


def test_no_import_cycle_between_the_packages():
    graph = package_graph()
    cycle = find_cycle(graph)
    if cycle:
        steps = [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import cycle " + " -> ".join(cycle) + ":\n" + "\n".join(steps))
