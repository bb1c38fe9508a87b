"""The paper's published numbers, for ``--compare paper``.

``paper_tables.csv`` next to this file holds the numbers of the paper's tables, transcribed from
the paper (tab:qwen_results, ..., and the supplementary tab:ablation_full_suppl last); a test
checks that it is whole (every table's rows and columns, numbers that parse, no duplicates).
Columns: ``table, model, frames, ratio, method, benchmark, value`` (value ``OOM`` or a number).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Optional

from vcast.report.layouts import Layout
from vcast.report.names import model_name

SHIPPED = Path(__file__).with_name("paper_tables.csv")


class PaperTables:
    """Published values keyed by (table, model, frames, ratio, method, benchmark)."""

    name = "paper"
    caption = "Ours − paper (published value)"

    def __init__(self, path: Path = SHIPPED) -> None:
        self.path = Path(path)
        self.values: dict[tuple[str, str, int, float, str, str], str] = {}
        with self.path.open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                key = (row["table"], row["model"], int(row["frames"]), round(float(row["ratio"]), 6),
                       row["method"], row["benchmark"])
                self.values[key] = row["value"]

    def raw(self, table: str, model: str, frames: int, ratio: float, method: str, benchmark: str) -> Optional[str]:
        """The published text (a number or ``OOM``), or None when the paper has no such entry."""
        return self.values.get((table, model, int(frames), round(float(ratio), 6), method, benchmark))

    def value(self, table: str, layout: Layout, entry, benchmark: str) -> Optional[float]:
        """The published number of ``entry`` (a :class:`vcast.report.tables.Entry`) in ``benchmark``,
        or None (not in the paper, or OOM there)."""
        text = self.raw(table, model_name(layout.model), entry.frames, entry.ratio, entry.paper_method, benchmark)
        try:
            number = float(text) if text is not None else math.nan
        except ValueError:
            return None
        return number if math.isfinite(number) else None
