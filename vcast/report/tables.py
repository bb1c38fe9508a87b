"""Fill a :class:`~vcast.report.layouts.Layout` from the tidy frame: values, Average, %, marks.

Conventions (the paper's, so that a rebuilt table matches the published one number for number):

* ``Average`` is the mean of the layout's ``average_of`` benchmarks, each taken at the one
  decimal the table prints (rounded half up); ``Average%`` is the row's Average over the
  reference (vanilla) Average of the same frame count, both at one decimal, times 100.
* A value is ``ok``, ``oom`` (the cell ran out of memory), ``failed`` or ``missing`` (no cell);
  a derived value with any such component is ``missing`` (printed ``–``, as the paper's ``-``).
* Inside a ranked block, per column, the best printed value is marked ``best`` and the next
  distinct one ``second`` (ties share a mark; a column where every value ties gets no marks);
  the reference row is never ranked.
* A row whose values come from a partial run (``limit``) is marked ``†`` and named in a
  footnote; rows with items whose video could not be read are footnoted with the counts.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Optional, Sequence

import pandas as pd

from vcast.report.collect import KEPT_PERCENT, LAYER_PERCENT, one_row_per_cell
from vcast.report.layouts import DERIVED_KEYS, REFERENCE, Column, Layout, Row, Section
from vcast.report.names import latex, method_latex, method_name, model_name, paper_name

logger = logging.getLogger(__name__)


def round_half_up(value: float, digits: int) -> float:
    """``value`` rounded as a person would (2.45 -> 2.5), ignoring float noise below 1e-9."""
    quantum = Decimal(1).scaleb(-digits)
    return float(Decimal(repr(round(value, 9))).quantize(quantum, rounding=ROUND_HALF_UP))


@dataclass
class Entry:
    """One line of a rendered table: a section title, a block title, or a row of values."""

    kind: str                                   # "section" | "block" | "row"
    title: str = ""
    frames: Optional[int] = None
    ratio: Optional[float] = None
    method: Optional[str] = None
    label: str = ""                             # plain text (Markdown, CSV)
    latex_label: str = ""
    paper_method: str = ""                      # the row's name in paper_tables.csv
    paper_table: str = ""
    reference: bool = False
    values: dict[str, float] = field(default_factory=dict)   # NaN where there is no number
    states: dict[str, str] = field(default_factory=dict)     # ok | oom | failed | missing
    marks: dict[str, str] = field(default_factory=dict)      # best | second
    notes: dict[str, str] = field(default_factory=dict)      # efficiency: change vs the reference
    partial: dict[str, float] = field(default_factory=dict)  # cell -> limit, for its partial (smoke-run) cells
    missing_videos: dict[str, int] = field(default_factory=dict)  # cell -> items without a readable video
    intervals: dict[str, float] = field(default_factory=dict)  # column -> ± half-width (--intervals)


@dataclass
class Table:
    layout: Layout
    model: str
    entries: list[Entry]
    extra_notes: list[str] = field(default_factory=list)  # more footnotes (the ± intervals' definition)

    @property
    def rows(self) -> list[Entry]:
        return [entry for entry in self.entries if entry.kind == "row"]

    @property
    def partial(self) -> dict[str, float]:
        """Every partial (smoke-run) cell behind the table -> its limit."""
        return {cell: limit for entry in self.rows for cell, limit in entry.partial.items()}

    @property
    def has_intervals(self) -> bool:
        """Whether any cell carries a ``±`` half-width (see :mod:`vcast.report.intervals`)."""
        return any(entry.intervals for entry in self.rows)

    @property
    def missing_videos(self) -> dict[str, int]:
        """Every cell behind the table with unreadable videos -> how many items."""
        return {cell: n for entry in self.rows for cell, n in entry.missing_videos.items()}

    def footnotes(self) -> list[str]:
        """Plain-text footnotes: partial cells, then cells that missed videos."""
        notes = []
        if self.partial:
            notes.append("† partial run (limit): " + "; ".join(f"{cell} (limit {limit:g})"
                                                               for cell, limit in sorted(self.partial.items())))
        if self.missing_videos:
            notes.append("items without a readable video (answered empty): " + "; ".join(
                f"{cell} ({n})" for cell, n in sorted(self.missing_videos.items())))
        return notes + self.extra_notes


class _Lookup:
    """(frames, ratio, method, benchmark) -> (value, status) over the table's cells, and which
    cell each value came from (its limit and missing videos)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        unique = one_row_per_cell(frame, ["frames", "ratio", "method", "benchmark"])
        self._values = {
            (int(r.frames), round(float(r.ratio), 6), r.method, r.benchmark): (float(r.value), r.status)
            for r in unique.itertuples(index=False)
        }
        self._cells = {
            (int(r.frames), round(float(r.ratio), 6), r.method, r.benchmark):
                (r.cell, float(getattr(r, "limit", math.nan)), int(getattr(r, "missing_videos", 0) or 0))
            for r in unique.itertuples(index=False)
        }

    def get(self, frames: int, ratio: float, method: str, benchmark: str) -> tuple[float, str]:
        return self._values.get((frames, round(ratio, 6), method, benchmark), (math.nan, "missing"))

    def note_cell(self, entry: Entry, benchmark: str) -> None:
        """Record on ``entry`` whether the cell behind its ``benchmark`` is partial or missed videos."""
        found = self._cells.get((entry.frames, round(entry.ratio or 0.0, 6), entry.method, benchmark))
        if found is None:
            return
        cell, limit, missing = found
        if math.isfinite(limit):
            entry.partial[cell] = limit
        if missing:
            entry.missing_videos[cell] = missing


def _row_values(lookup: _Lookup, layout: Layout, frames: int, ratio: float, method: str) -> Entry:
    entry = Entry("row", frames=frames, ratio=ratio, method=method)
    for column in layout.columns:
        if column.key in DERIVED_KEYS:
            continue
        lookup.note_cell(entry, column.source or column.key)
        value, state = lookup.get(frames, ratio, method, column.source or column.key)
        entry.values[column.key], entry.states[column.key] = (value, "ok") if state == "ok" else (math.nan, state)
    if layout.average_of:
        parts = [lookup.get(frames, ratio, method, name) for name in layout.average_of]
        if all(state == "ok" for _, state in parts):
            entry.values["Average"] = sum(round_half_up(v, 1) for v, _ in parts) / len(parts)
            entry.states["Average"] = "ok"
        else:
            entry.values["Average"], entry.states["Average"] = math.nan, "missing"
    return entry


def _percent(entry: Entry, reference: Entry) -> None:
    ours, base = entry.values.get("Average", math.nan), reference.values.get("Average", math.nan)
    if math.isfinite(ours) and math.isfinite(base) and round_half_up(base, 1) > 0:
        entry.values["Average%"] = round_half_up(ours, 1) / round_half_up(base, 1) * 100.0
        entry.states["Average%"] = "ok"
    else:
        entry.values["Average%"], entry.states["Average%"] = math.nan, "missing"


def _mean_over_tasks(rows: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    """``rows`` with the ``benchmark`` rows of each (frames, ratio, method) replaced by their mean."""
    chosen = rows["benchmark"] == benchmark
    if not chosen.any():
        return rows
    kept = one_row_per_cell(rows[chosen], ["frames", "ratio", "method", "task"])
    mean = kept.groupby(["frames", "ratio", "method"], as_index=False).agg(
        value=("value", "mean"), experiment=("experiment", "first"), model=("model", "first"),
        cell=("cell", "first"), profile=("profile", "first"), variant=("variant", "first"),
        limit=("limit", "max"), missing_videos=("missing_videos", "sum"), memory_source=("memory_source", "first"))
    mean = mean.assign(task="", benchmark=benchmark, status="ok")[rows.columns]
    return pd.concat([rows[~chosen], mean], ignore_index=True)


def _mark(rows: Sequence[Entry], columns: Sequence[Column]) -> None:
    for column in columns:
        if not column.ranked:
            continue
        printed = {id(row): round_half_up(row.values[column.key], column.digits)
                   for row in rows if row.states.get(column.key) == "ok"}
        if len(printed) < 2:
            continue  # nothing to rank against
        distinct = sorted(set(printed.values()), reverse=column.higher_is_better)
        if len(distinct) < 2:
            continue  # every value ties: marking them all "best" says nothing
        for row in rows:
            if id(row) in printed:
                if printed[id(row)] == distinct[0]:
                    row.marks[column.key] = "best"
                elif len(distinct) > 1 and printed[id(row)] == distinct[1]:
                    row.marks[column.key] = "second"


def _efficiency_notes(entry: Entry, reference: Entry, columns: Sequence[Column]) -> None:
    """The paper's annotations: % change of latency/memory, x-factor of throughput, point change of score."""
    for column in columns:
        ours, base = entry.values.get(column.key, math.nan), reference.values.get(column.key, math.nan)
        if not (column.ranked and column.annotated) or not (math.isfinite(ours) and math.isfinite(base)) or base == 0:
            continue
        if column.key == "Throughput_items_per_s":
            entry.notes[column.key] = f"{ours / base:.2f}×"
        elif column.key == "Performance":
            diff = ours - base
            entry.notes[column.key] = f"{'↓' if diff < 0 else '↑'}{abs(diff):.1f}"
        else:
            change = (ours / base - 1.0) * 100.0
            entry.notes[column.key] = f"{'↓' if change < 0 else '↑'}{abs(change):.1f}%"


def _labelled(entry: Entry, row: Row, layout: Layout, section: Section, model: str) -> Entry:
    plain = row.label or method_name(row.method)
    entry.label = plain
    entry.latex_label = latex(row.label) if row.label else method_latex(row.method)
    entry.paper_method = row.paper or paper_name(plain)
    entry.paper_table = section.paper_table or layout.label
    return entry


def build_table(frame: pd.DataFrame, layout: Layout, *, model: Optional[str] = None,
                experiments: Optional[Sequence[str]] = None, kept_tokens: bool = False) -> Table:
    """``layout`` filled from ``frame`` (the tidy frame of :func:`vcast.report.collect.collect`).

    Args:
        frame: tidy rows; only ``model`` (default: the layout's) and, when given, ``experiments``
            are used; an efficiency layout reads its ``task`` only.
        kept_tokens: add two last columns, averaged over the row's tasks (not ranked): "Kept %",
            the video tokens each method really let into the language model, in percent of the
            unpruned count; "Layer-avg %", the share each decoder layer saw on average (lower
            than "Kept %" for in-LLM methods, which drop more between layers).
    """
    model = model or layout.model
    rows = frame[frame["model"] == model]
    if experiments:
        rows = rows[rows["experiment"].isin(list(experiments))]
    if layout.task:
        rows = rows[rows["task"] == layout.task]
    if kept_tokens:
        layout = replace(layout, columns=(*layout.columns, Column(KEPT_PERCENT, "Kept %", ranked=False),
                                          Column(LAYER_PERCENT, "Layer-avg %", ranked=False)))
        rows = _mean_over_tasks(_mean_over_tasks(rows, KEPT_PERCENT), LAYER_PERCENT)
    if rows.empty and not frame.empty:
        logger.warning("%s: no cells of model %s%s; every value is missing", layout.label, model,
                       f" in experiment(s) {', '.join(experiments)}" if experiments else "")
    lookup = _Lookup(rows)
    entries: list[Entry] = []
    for section in layout.sections:
        if section.title:
            entries.append(Entry("section", title=section.title))
        reference = _row_values(lookup, layout, section.frames, 1.0, REFERENCE)
        plain_reference = section.reference_label or model_name(model)
        _labelled(reference, Row(REFERENCE, label=plain_reference, paper=section.reference_label or model_name(layout.model)),
                  layout, section, model)
        reference.reference = True
        if layout.has_percent:
            _percent(reference, reference)
        entries.append(reference)
        for block in section.blocks:
            if block.title:
                entries.append(Entry("block", title=block.title))
            block_rows = [_labelled(_row_values(lookup, layout, section.frames, block.ratio, row.method),
                                    row, layout, section, model) for row in block.rows]
            for entry in block_rows:
                if layout.has_percent:
                    _percent(entry, reference)
                if layout.efficiency:
                    _efficiency_notes(entry, reference, layout.columns)
            if block.ranked:
                _mark(block_rows, layout.columns)
            entries.extend(block_rows)
    return Table(layout, model, entries)
