"""The report stage stays readable: no module over 400 lines, and no module imports another
module's private name (what one module needs of another is that module's public interface)."""

from __future__ import annotations

import ast
import re
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


HTML_TAG = re.compile(r"</?(?:p|a|h[1-6]|code|pre|strong|em|span|div|table|thead|tbody|tr|td|th|figure|img|figcaption|"
                      r"details|summary|ul|li|label|input|nav|br|svg|polyline|line|text|title|script|style)\b[ >/]")


def inline_html(source: str) -> list[str]:
    """``line: text`` of each string in ``source`` (docstrings aside) that holds an HTML tag."""
    tree = ast.parse(source)
    prose = {id(node.body[0].value) for node in ast.walk(tree)
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
             and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [f"{node.lineno}: {node.value[:40]!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
            and HTML_TAG.search(node.value)]


def test_the_sites_pages_build_html_only_through_its_helpers() -> None:
    """Every tag of the results site comes from vcast/report/site/html.py; the page modules compose."""
    pages = [p for p in sorted((REPORT / "site").glob("*.py")) if p.name != "html.py"]
    found = {p.name: hits for p in pages if (hits := inline_html(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_html_check_sees_a_tag() -> None:
    assert inline_html('body.append(f"<p>{text}</p>")\n') and inline_html("x = '<h2>Tables</h2>'\n")
    assert inline_html('"""A <p> in prose."""\nmessage = "no cell (<experiment>/<model>) in it"\n') == []
