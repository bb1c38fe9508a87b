"""The installed packages hold only what users run; what only the tests use lives in ``tests/``.

``pyproject.toml`` installs ``vcast``, ``baselines`` and ``hydra_plugins.vcast_sweeper`` (``packages.find``:
``vcast*``, ``baselines*``, ``hydra_plugins*``; Hydra finds a sweeper only under that namespace). No module of theirs may import ``tests`` (an installed vcast has no ``tests``),
and none may be a module that nothing but the tests uses (a test cluster, a results generator:
those belong in ``tests/support/``).

"Used outside the tests" means, for a module of ``vcast/`` or ``baselines/``, any of:

* a Python file outside ``tests/`` imports it (``vcast/``, ``baselines/``, ``scripts/``, and the
  Python blocks of README.md and ``docs/*.md``): ``import m``, ``from m import x``, ``from p import
  m``, relative imports, at any depth of the file (lazy imports count);
* such a file names it in a string, as a dotted path alone or before an attribute
  (``"vcast.families.llava_onevision.plugin.VCastLlavaOV"``, ``[sys.executable, "-m", "vcast.eval.run"]``);
* ``pyproject.toml``'s entry points name it, or the Makefile, a doc, ``.ci/`` or a shell script
  runs it with ``python -m``, or a Hydra config under ``configs/`` names it;
* something loads it by name: ``__init__`` and ``__main__`` modules (the package, ``python -m``);
  every submodule of a package whose ``__init__`` walks ``pkgutil.iter_modules(__path__)``, and
  the ``method`` module of each of its subpackages (how ``baselines`` registers its methods); a
  module that an lmms-eval task YAML next to it names with ``!function <module>.<name>``.

The rule reads files only (nothing is imported), so it holds in any environment.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("vcast", "baselines", "hydra_plugins")  # hydra_plugins.vcast_sweeper: the sweep's Hydra sweeper
DOTTED = re.compile(r"^(?:vcast|baselines)(?:\.\w+)+(?::\w+)?$")
PATH = re.compile(r"^(?:vcast|baselines)(?:/\w+)+\.py$")
# What only the tests use, moved out of the installed package (never back).
MOVED = {"vcast/testing": "tests/support/slurm_cluster.py, paper_results.py, sample_logs.py",
         "vcast/vllm/testing.py": "vcast/vllm/tiny_checkpoints.py (user-facing: make demo-vllm)"}


def _files(folder: Path, pattern: str = "*.py") -> list[Path]:
    return sorted(p for p in folder.rglob(pattern) if "__pycache__" not in p.parts and p.is_file())


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_name(path): path for package in PACKAGES for path in _files(REPO / package)}


def _longest_module(dotted: str, modules: dict[str, Path]) -> str | None:
    parts = dotted.split(":")[0].split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _references(source: str, where: Path | None, modules: dict[str, Path]) -> tuple[set[str], set[str]]:
    """(the modules Python ``source`` imports, the project modules it names in strings); ``where``:
    its file in the repository (for relative imports), None for a doc's block."""
    tree = ast.parse(source)
    here = _name(where).split(".") if where is not None and where.parts[len(REPO.parts)] in PACKAGES else []
    package = here if where is not None and where.name == "__init__.py" else here[:-1]
    imported, named = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            imported.add(module)
            imported |= {f"{module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value.strip()
            if DOTTED.match(value):
                named.add(_longest_module(value, modules) or "")
            elif PATH.match(value):
                named.add(value[:-3].replace("/", "."))
    return imported, named


def _doc_blocks() -> list[str]:
    fence = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    blocks = [block for page in pages for block in fence.findall(page.read_text(encoding="utf-8"))]
    return [block for block in blocks if _parses(block)]  # test_docs.py runs them; a no-run one may not parse


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _run_by_name(modules: dict[str, Path]) -> set[str]:
    """Modules named in ``pyproject.toml``'s entry points, ``python -m`` lines and Hydra configs."""
    texts = [REPO / "Makefile", *(REPO / "docs").glob("*.md"), REPO / "README.md",
             *_files(REPO / ".ci", "*"), *_files(REPO / "scripts", "*.sh")]
    text = "\n".join(path.read_text(encoding="utf-8", errors="replace") for path in texts if path.is_file())
    found = set(re.findall(r"python3?\S* -m ([\w.]+)", text))
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    found |= set(re.findall(r'^\s*[\w.-]+\s*=\s*"((?:vcast|baselines)[\w.]*):\w+"', pyproject, re.M))
    for config in _files(REPO / "configs", "*.yaml"):
        for dotted in re.findall(r"\b(?:vcast|baselines)(?:\.\w+)+", config.read_text(encoding="utf-8")):
            found.add(_longest_module(dotted, modules) or "")
    return found


def _loaded_by_name(modules: dict[str, Path]) -> set[str]:
    loaded = set()
    for name, path in modules.items():
        if path.name in ("__init__.py", "__main__.py"):
            loaded.add(name)
        if name.startswith("hydra_plugins."):  # Hydra imports every module of the namespace to find its plugins
            loaded.add(name)
        init = path.parent / "__init__.py"
        parent_init = path.parent.parent / "__init__.py"
        if init.is_file() and "pkgutil.iter_modules(__path__)" in init.read_text(encoding="utf-8"):
            loaded.add(name)  # a direct submodule (module or subpackage) of a self-loading package
        if (path.name == "method.py" and parent_init.is_file()
                and "pkgutil.iter_modules(__path__)" in parent_init.read_text(encoding="utf-8")):
            loaded.add(name)
        for task in path.parent.glob("*.yaml"):
            if re.search(rf"!function\s+{re.escape(path.stem)}\.\w+", task.read_text(encoding="utf-8")):
                loaded.add(name)
    return loaded


def _outside_tests_users(modules: dict[str, Path]) -> set[str]:
    used = set()
    sources = [(path.read_text(encoding="utf-8"), path)
               for folder in (*PACKAGES, "scripts") for path in _files(REPO / folder)]
    sources += [(block, None) for block in _doc_blocks()]
    for source, where in sources:
        imported, named = _references(source, where, modules)
        self_name = _name(where) if where is not None and where.parts[len(REPO.parts)] in PACKAGES else None
        used |= (imported | named) - {self_name}
    return used | _run_by_name(modules) | _loaded_by_name(modules)


def test_installed_modules_never_import_tests() -> None:
    modules = _modules()
    offenders = []
    for name, path in modules.items():
        imported, _ = _references(path.read_text(encoding="utf-8"), path, modules)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        dynamic = {node.args[0].value for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                   and isinstance(node.args[0].value, str)
                   and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")}
        offenders += [f"{name} imports {module}" for module in sorted(imported | dynamic)
                      if module == "tests" or module.startswith("tests.")]
    assert not offenders, "the installed packages have no `tests`: " + "; ".join(offenders)


def test_no_test_only_module_in_the_installed_packages() -> None:
    modules = _modules()
    used = _outside_tests_users(modules)
    tests_use = set()
    for path in _files(REPO / "tests"):
        tests_use |= _references(path.read_text(encoding="utf-8"), path, modules)[0]
    unused = sorted(name for name in modules if name not in used)
    test_only = [name for name in unused if name in tests_use or any(m.startswith(name + ".") for m in tests_use)]
    assert not test_only, (f"only the tests use {test_only}: move them to tests/support/ "
                           "(or use them from vcast, scripts/ or a documented command)")
    assert not unused, f"nothing imports or runs {unused} (dead code, or a loader this test does not know)"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_test_infrastructure_stays_out(old: str) -> None:
    assert not (REPO / old).exists(), f"{old} moved: {MOVED[old]}"


def test_support_modules_are_with_the_tests_and_not_installed() -> None:
    for module in ("slurm_cluster", "paper_results", "sample_logs"):
        assert (REPO / "tests" / "support" / f"{module}.py").is_file()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    from setuptools import find_namespace_packages

    find = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]
    shipped = find_namespace_packages(where=str(REPO / find.get("where", ["."])[0]),
                                      include=find.get("include", ["*"]), exclude=find.get("exclude", ()))
    assert {"vcast", "baselines"} <= set(shipped), shipped
    assert not [name for name in shipped if name.split(".")[0] not in PACKAGES], shipped
    assert not [name for name in shipped if "testing" in name.split(".")], shipped
