"""What a kit run found, and the files it writes: the log, ``checks.md``, the tables (CSV and
Markdown) and ``environment.json``, all rewritten atomically after every step, so a run that is
stopped (out of time on a lent machine) still leaves everything it measured up to then.

At most 8 files, under the output folder (the device tool brings back at most 8).
"""

from __future__ import annotations

import csv
import io
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from vcast.atomic_files import atomic_write_json, atomic_write_text

PASS, FAIL, SKIPPED = "pass", "fail", "skipped"
LOG, ENVIRONMENT, CHECKS = "gpu-check.log", "environment.json", "checks.md"
TABLES = ("efficiency", "selection", "pipeline")  # each as <name>.csv
# Each table's Markdown file: the pipeline table ends efficiency.md (where the total time goes), so
# that the kit stays within the device tool's 8 files.
MARKDOWN = {"efficiency": "efficiency.md", "selection": "selection.md", "pipeline": "efficiency.md"}
OUTPUT_FILES = (LOG, ENVIRONMENT, CHECKS, *(f"{name}.csv" for name in TABLES), *dict.fromkeys(MARKDOWN.values()))


@dataclass(frozen=True)
class Check:
    """One check: ``name`` (``part/what``), ``status`` (pass, fail, skipped) and why."""

    name: str
    status: str
    detail: str = ""


@dataclass
class Table:
    """Rows of one output table, and the Markdown written for it (set by the part that measured it)."""

    rows: list[dict[str, Any]]
    markdown: str = ""


class Budget:
    """Wall-clock seconds a run may spend; parts ask before a step whether it still fits."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def left(self) -> float:
        return math.inf if self.seconds is None else self.seconds - self.elapsed

    def allows(self, estimate_s: float) -> bool:
        """Whether a step expected to take ``estimate_s`` seconds ends inside the budget."""
        return estimate_s <= self.left


class Report:
    """Collects the checks, the tables and the log of one run and writes them to ``out``."""

    def __init__(self, out: Path, budget: Budget, echo: bool = True) -> None:
        self.out = Path(out)
        self.budget = budget
        self.echo = echo
        self.checks: list[Check] = []
        self.lines: list[str] = []
        self.tables: dict[str, Table] = {}
        self.environment: dict[str, Any] = {}
        self.notes: dict[str, str] = {}  # part -> Markdown appended to checks.md (e.g. pytest's summary)

    def log(self, message: str) -> None:
        """A progress line, with the seconds since the start, to stdout and the log."""
        line = f"[{self.budget.elapsed:7.1f}s] {message}"
        self.lines.append(line)
        if self.echo:
            print(line, file=sys.stdout, flush=True)

    def check(self, name: str, status: str, detail: str = "") -> Check:
        if status not in (PASS, FAIL, SKIPPED):
            raise ValueError(f"unknown check status {status!r}")
        check = Check(name, status, detail)
        self.checks.append(check)
        self.log(f"{name}: {status.upper()}{f' ({detail})' if detail else ''}")
        return check

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    def counts(self) -> dict[str, int]:
        return {status: sum(c.status == status for c in self.checks) for status in (PASS, FAIL, SKIPPED)}

    def flush(self) -> None:
        """(Re)write every output file from what is known now."""
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.out / LOG, "\n".join(self.lines) + "\n")
        atomic_write_json(self.out / ENVIRONMENT, self.environment)
        atomic_write_text(self.out / CHECKS, self.checks_markdown())
        markdown: dict[str, list[str]] = {}
        for name in TABLES:
            table = self.tables.get(name, Table([], f"No {name} table in this run (part not run, or skipped).\n"))
            atomic_write_text(self.out / f"{name}.csv", to_csv(table.rows))
            markdown.setdefault(MARKDOWN[name], []).append(table.markdown)
        for file, texts in markdown.items():
            atomic_write_text(self.out / file, "\n".join(texts))

    def checks_markdown(self) -> str:
        env = self.environment
        counts = self.counts()
        lines = [
            "# GPU check kit: checks",
            "",
            f"Mode **{env.get('mode', '?')}** on {env.get('card') or env.get('device', '?')}, "
            f"torch {env.get('torch', '?')}, transformers {env.get('transformers', '?')}, commit "
            f"`{env.get('commit', '?')}` (full environment: `{ENVIRONMENT}`).",
            "",
            f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIPPED]} skipped "
            f"({self.budget.elapsed:.0f} s so far).",
            "",
            "| check | status | detail |",
            "|---|---|---|",
        ]
        lines += [f"| {c.name} | {c.status} | {_cell(c.detail)} |" for c in self.checks]
        for part, text in self.notes.items():
            lines += ["", f"## {part}", "", text.rstrip()]
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """CSV with the union of the rows' keys as columns (first-seen order); empty text for no rows."""
    if not rows:
        return ""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _csv_value(value) for key, value in row.items()})
    return buffer.getvalue()


def _csv_value(value: Any) -> Any:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return "" if value is None else value


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; floats printed by the caller (cells are used as given)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(str(cell)) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def fmt(value: Optional[float], digits: int = 1) -> str:
    """``value`` with ``digits`` decimals, or an en dash for None / NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"
