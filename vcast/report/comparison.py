"""What a table can be compared with, column by column: ``--compare paper | clean``.

A comparison answers "the other value of this row and column, as that table prints it":
:class:`vcast.report.paper.PaperTables` (the published numbers) or :class:`ProfileTable` (the
same layout built from the cells of another sweep profile, e.g. ``clean``: every method in
``variant="paper"``, next to the reproduction variants).
"""

from __future__ import annotations

import math
from typing import Optional, Protocol

from vcast.report.layouts import Layout
from vcast.report.tables import Entry, Table, round_half_up


class Comparison(Protocol):
    name: str       # the CSV suffix: <column>_vs_<name>
    caption: str    # the Markdown heading of the difference table

    def value(self, table: str, layout: Layout, entry: Entry, benchmark: str) -> Optional[float]: ...


class ProfileTable:
    """The rows of ``other`` (a built table of the same layout) as a comparison."""

    def __init__(self, other: Table, profile: str) -> None:
        self.name = profile
        self.caption = f"This profile − profile {profile} (same grid)"
        self._rows = {(row.frames, round(float(row.ratio), 6), row.method): row for row in other.rows}

    def value(self, table: str, layout: Layout, entry: Entry, benchmark: str) -> Optional[float]:
        """``benchmark`` of the row with ``entry``'s frames, ratio and method, as printed; None
        when that row has no number."""
        row = self._rows.get((entry.frames, round(float(entry.ratio), 6), entry.method))
        if row is None or row.states.get(benchmark) != "ok":
            return None
        column = next(c for c in layout.columns if c.key == benchmark)
        value = row.values[benchmark]
        return round_half_up(value, column.digits) if math.isfinite(value) else None
