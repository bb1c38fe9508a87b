"""Only :mod:`vcast.results` reads a results tree's files: a module elsewhere that reads a cell's
record, samples, kept-token or efficiency files itself (by their names) fails here, as does one that
imports the names of those files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READER = ROOT / "vcast" / "results"
# The files of a cell only the reader opens, by the names (or globs) that find them. A string with
# white space in it is a message to a user, which may name them.
FILE_NAMES = {"cell.json": re.compile(r"(^|/)cell\.json$"), "_samples_": re.compile(r"_samples_"),
              "rank*.jsonl": re.compile(r"(^|/)rank\*\.jsonl$")}
LAYOUT_NAMES = {"CELL_FILE", "DONE_FILE", "EFFICIENCY_RECORDS", "KEPT_RECORDS"}
READER_PRIVATE = {"vcast.results.record": {"read_record", "record_from_json"}}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of ``tree`` (they may name the files: they are prose)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def direct_reads(source: str) -> list[str]:
    """``line: what`` for each place ``source`` names a cell file only the reader may open."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            text = node.value
            hits = [name for name, pattern in FILE_NAMES.items() if not re.search(r"\s", text) and pattern.search(text)]
            if hits:
                found.append(f"{node.lineno}: names {', '.join(hits)} ({node.value[:40]!r})")
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = {alias.name for alias in node.names}
            bad = sorted(names & (LAYOUT_NAMES | READER_PRIVATE.get(node.module, set())))
            if bad:
                found.append(f"{node.lineno}: imports {', '.join(bad)} from {node.module}")
    return found


def _modules() -> list[Path]:
    paths = [p for folder in ("vcast", "baselines", "scripts") for p in sorted((ROOT / folder).rglob("*.py"))]
    return [p for p in paths if READER not in p.parents and "__pycache__" not in p.parts]


def test_no_module_outside_the_reader_reads_a_cells_files() -> None:
    offenders = {str(path.relative_to(ROOT)): hits for path in _modules()
                 if (hits := direct_reads(path.read_text(encoding="utf-8")))}
    assert offenders == {}, "read these through vcast.results.tree (Cell / ResultsTree): " + repr(offenders)


@pytest.mark.parametrize("snippet, expected", [
    ('import json\nrecord = json.loads((cell / "cell.json").read_text())', "names cell.json"),
    ('from vcast.sweep.cell import CELL_FILE, read_cell', "imports CELL_FILE"),
    ('from vcast.results.layout import CELL_FILE\nrecord = (cell / CELL_FILE).read_text()', "imports CELL_FILE"),
    ('paths = sorted(cell.rglob(f"*_samples_{task}.jsonl"))', "names _samples_"),
    ('rows = read_jsonl(cell / "efficiency", "rank*.jsonl")', "names rank*.jsonl"),
    ('from vcast.results.record import read_record', "imports read_record"),
])
def test_the_check_sees_each_way_of_reading_directly(snippet: str, expected: str) -> None:
    """What the check above catches (the ways the report and the sweep read cells before the reader)."""
    (hit,) = direct_reads(snippet)
    assert expected in hit


def test_prose_may_name_the_files() -> None:
    assert direct_reads('"""Reads ``cell.json`` and ``*_samples_<task>.jsonl``."""\nx = 1\n') == []
    assert direct_reads('raise ValueError("no cell (<task>/cell.json) in it")\n') == []  # a message
    assert direct_reads('errors = read_jsonl(folder, "missing_rank*.jsonl")\n') == []  # not a cell's rank file
