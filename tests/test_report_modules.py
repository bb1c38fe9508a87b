"""The report stage stays readable: no module over 400 lines, and no module imports another
module's private name (what one module needs of another is that module's public interface)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "vcast" / "report"
MAX_LINES = 400


def _modules() -> list[Path]:
    return sorted(p for p in REPORT.rglob("*.py") if "__pycache__" not in p.parts)


def private_imports(source: str) -> list[str]:
    """``line: module.name`` for each private name (``_x``, not ``__future__``'s) ``source`` imports
    from another module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            found += [f"{node.lineno}: {node.module}.{alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_report_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_no_report_module_imports_a_private_name() -> None:
    found = {str(p.relative_to(ROOT)): hits for p in _modules()
             if (hits := private_imports(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_check_sees_a_private_import() -> None:
    assert private_imports("from vcast.report.export import _printed, write_table\n") == [
        "1: vcast.report.export._printed"]
    assert private_imports("from __future__ import annotations\nfrom a import __version__\n") == []
