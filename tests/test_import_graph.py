"""No import circles in the project, and no import inside a function that only breaks one.

The graph is read from the source (``ast``), not by importing: a module-level import of a project
module is an edge, and importing ``a.b.c`` also runs ``a`` and ``a.b`` (their ``__init__``). A
circle among module-level edges fails; so does an import inside a function whose target already
reaches the importing module (it exists only to dodge that circle). Imports under
``if TYPE_CHECKING:`` never run and are not edges.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("vcast", "baselines", "tests", "scripts")


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if "data" in parts or "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """The project module that ``import name`` runs last (``a.b.func`` -> ``a.b``), or ``""``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _imports(module: str, path: Path, modules: dict[str, Path]) -> tuple[set[str], list[tuple[str, int]]]:
    """``(module-level targets, [(function-level target, line)])`` of ``module``."""
    top: set[str] = set()
    inner: list[tuple[str, int]] = []
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            anchor = package[:len(package) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        return [base] + [f"{base}.{alias.name}" for alias in node.names]

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            function = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for name in targets(child):
                    target = _resolve(name, modules)
                    if target and target != module:
                        if function:
                            if (target, child.lineno) not in inner:
                                inner.append((target, child.lineno))
                        else:
                            top.add(target)
            visit(child, function)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return top, inner


def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, int]]]]:
    modules = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    inner: dict[str, list[tuple[str, int]]] = {}
    for module, path in modules.items():
        top, inner[module] = _imports(module, path, modules)
        for target in top:
            edges[module].add(target)
            parts = target.split(".")
            edges[module].update(p for p in (".".join(parts[:i]) for i in range(1, len(parts)))
                                 if p in modules and p != module)
    return edges, inner


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> list[str]:
    """A path of module-level imports from ``start`` to ``goal`` ([] if none)."""
    parents = {start: ""}
    stack = [start]
    while stack:
        node = stack.pop()
        if node == goal:
            path = [node]
            while parents[path[-1]]:
                path.append(parents[path[-1]])
            return path[::-1]
        for nxt in sorted(edges[node]):
            if nxt not in parents:
                parents[nxt] = node
                stack.append(nxt)
    return []


def _explicit(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The edges a module writes itself, without "a submodule runs its parent package first": a
    package whose ``__init__`` imports its own parts is how packages look, not a circle."""
    return defaultdict(set, {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in edges.items()})


def test_no_import_circles() -> None:
    explicit = _explicit(_graph()[0])
    circles = set()
    for module in sorted(explicit):
        for target in sorted(explicit[module]):
            path = _reaches(explicit, target, module)
            if path:
                cycle = [module, *path[:-1]]
                first = cycle.index(min(cycle))  # one spelling per circle
                circles.add(" -> ".join(cycle[first:] + cycle[:first + 1]))
    assert sorted(circles) == []


def test_no_function_level_import_breaks_a_circle() -> None:
    edges, inner = _graph()
    explicit = _explicit(edges)
    dodges = []
    for module, targets in sorted(inner.items()):
        for target, line in targets:
            path = _reaches(explicit, target, module)
            if path:
                dodges.append(f"{module}:{line} imports {target} inside a function, which imports it back: "
                              f"{' -> '.join(path)}")
    assert dodges == []


def test_no_method_module_imports_a_registration() -> None:
    """A method's ``method.py`` registers it; its variants and helpers, and every other method,
    import the modules that hold the code, never a registration (only the loaders do)."""
    edges, inner = _graph()
    loaders = {"baselines", "vcast.methods"}
    found = []
    for module in sorted(edges):
        if module in loaders or not module.startswith(("baselines.", "vcast.")):
            continue
        targets = set(edges[module]) | {target for target, _ in inner[module]}
        found += [f"{module} imports {target}" for target in sorted(targets)
                  if target.endswith(".method") and target.startswith(("baselines.", "vcast.methods."))]
    assert found == []


@pytest.mark.parametrize("source, outcomes", [
    ({"p/__init__.py": "", "p/a.py": "from p.b import f\n", "p/b.py": "from p.a import g\n"}, ["fail", "ok"]),
    ({"p/__init__.py": "", "p/a.py": "from p.b import f\n",
      "p/b.py": "def f():\n    from p.a import g\n    return g\n"}, ["ok", "fail"]),
    ({"p/__init__.py": "", "p/a.py": "from p.b import f\n",
      "p/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a import g\n"}, ["ok", "ok"]),
    ({"p/__init__.py": "from p import a\n", "p/a.py": "from p.b import f\n", "p/b.py": "x = 1\n"}, ["ok", "ok"]),
    ({"p/__init__.py": "from p import a\n", "p/a.py": "from p.b import f\n", "p/b.py": "from p import a\n"},
     ["fail", "ok"]),
    ({"p/__init__.py": "", "p/a.py": "def f():\n    import json\n    from p.b import g\n", "p/b.py": "x = 1\n"},
     ["ok", "ok"]),
])
def test_the_rules_on_small_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: dict[str, str],
                                     outcomes: list[str]) -> None:
    for name, text in source.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("p",))
    seen = []
    for test in (test_no_import_circles, test_no_function_level_import_breaks_a_circle):
        try:
            test()
            seen.append("ok")
        except AssertionError:
            seen.append("fail")
    assert seen == outcomes
