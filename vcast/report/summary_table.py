"""A one-benchmark experiment at a glance: methods as rows, retention ratios as columns (ascending),
each score with ± half its bootstrap interval, and the paired difference from V-CAST at the
smallest ratio with its 95 % interval (``<stem>-summary.{md,csv}``; ``make demo`` prints it).

It reads what the report computed already: the tidy frame (:func:`vcast.report.collect.collect`),
the per-cell intervals (:func:`vcast.report.analysis.accuracy_intervals`) and the paired
comparisons (:func:`vcast.report.analysis.compare_all`). Rows follow the order of the experiment
configs that file cells into the folder (:func:`vcast.sweep.grid.experiment_methods`), then any
other method by display name; every name is the report's one display name
(:func:`vcast.report.names.method_name`). A method whose cells let a different share of video
tokens into the language model than r asks for (its own budget, or pruning inside the LLM) gets a
footnote with the shares it measured.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from vcast.atomic_files import atomic_write_text
from vcast.report.analysis import VANILLA, VCAST
from vcast.report.analysis_export import MISSING, interval_text, signed
from vcast.report.collect import KEPT_PERCENT, LAYER_PERCENT, SIDE_COLUMNS
from vcast.report.export import PARTIAL_MARK
from vcast.report.names import method_name, model_name

SUFFIX = "-summary"
SUFFIXES = (".md", ".csv")
SHARE_TOLERANCE_PCT = 1.0  # kept shares within this of 100 r count as "r" (rounding of per-frame budgets)
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")  # footnote marks: ¹ ... ⁹, ¹⁰ ...


@dataclass
class SummaryTable:
    """The printed cells: ``header``, one row per method (``rows``: display name first), and the notes."""

    title: str
    header: list[str]
    rows: list[list[str]]
    methods: list[str]
    notes: list[str] = field(default_factory=list)


def _ratio(value: float) -> str:
    return f"r = {value:g}"


def summary_table(frame: pd.DataFrame, intervals: Optional[pd.DataFrame], comparisons: Optional[pd.DataFrame], *,
                  model: str, experiments: Sequence[str], order: Sequence[str] = ()) -> SummaryTable:
    """The summary of ``model``'s finished cells in ``experiments`` (see the module docstring).
    ValueError when they hold no cell, or more than one benchmark or frame count."""
    rows = frame[(frame["model"] == model) & frame["experiment"].isin(list(experiments)) & (frame["status"] == "ok")]
    scores = rows[~rows["benchmark"].isin(SIDE_COLUMNS)]
    benchmarks = sorted(set(scores["benchmark"]))
    if len(benchmarks) != 1:
        raise ValueError(f"a summary needs one benchmark; the cells have {', '.join(benchmarks) or 'none'}")
    (benchmark,) = benchmarks
    frames_counts = sorted(set(int(f) for f in scores["frames"]))
    if len(frames_counts) != 1:  # one column per ratio: two frame counts would share a column
        raise ValueError(f"a summary needs one frame count; the cells have {frames_counts}")
    ratios = sorted({round(float(r), 6) for r in scores[scores["method"] != VANILLA]["ratio"]})
    listed = [m for m in dict.fromkeys(order) if m in set(scores["method"])]
    methods = listed + sorted(set(scores["method"]) - set(listed), key=method_name)
    if VCAST in methods:  # vanilla, then V-CAST, then the rest in the grid's order
        methods.insert(1 if methods[0] == VANILLA else 0, methods.pop(methods.index(VCAST)))

    def interval(method: str, ratio: float) -> Optional[str]:
        if intervals is None or intervals.empty:
            return None
        found = intervals[(intervals["method"] == method) & (intervals["model"] == model)
                          & (intervals["benchmark"] == benchmark) & ((intervals["ratio"] - ratio).abs() < 1e-6)]
        return None if found.empty else f"{(found.iloc[0]['ci_high'] - found.iloc[0]['ci_low']) / 2:.1f}"

    partial: set[float] = set()

    def score(method: str, ratio: float) -> str:
        at = 1.0 if method == VANILLA else ratio
        found = scores[(scores["method"] == method) & ((scores["ratio"] - at).abs() < 1e-6)]
        if found.empty:
            return MISSING
        half = interval(method, at)
        limit = found.iloc[0]["limit"]
        if pd.notna(limit):
            partial.add(float(limit))
        return (f"{float(found.iloc[0]['value']):.1f}" + (f" ± {half}" if half is not None else "")
                + (PARTIAL_MARK if pd.notna(limit) else ""))

    lowest = ratios[0] if ratios else None
    header = ["Method", *(_ratio(r) for r in ratios)]
    paired = comparisons if comparisons is not None else pd.DataFrame()
    if lowest is not None and not paired.empty:
        header.append(f"Δ vs V-CAST, {_ratio(lowest)}")
    notes: list[str] = []
    printed = []
    for method in methods:
        name = method_name(method)
        mark = _share_note(rows, method, notes)
        line = [(f"**{name}**" if method == VCAST else name) + mark, *(score(method, r) for r in ratios)]
        if len(header) > len(ratios) + 1:
            line.append(_difference(paired, method, lowest, benchmark))
        printed.append(line)
    if partial:
        limits = ", ".join(f"{value:g}" for value in sorted(partial))
        notes.append(f"{PARTIAL_MARK.strip()} a partial run (limit {limits}): not a full result.")
    title = (f"{model_name(model)}, {frames_counts[0]} frames, {benchmark}: accuracy %, ± half the cell's 95 % "
             "bootstrap interval" + (f"; the last column is the paired difference from V-CAST at {_ratio(lowest)} "
                                     "with its 95 % interval" if len(header) > len(ratios) + 1 else ""))
    return SummaryTable(title, header, printed, methods, notes)


def _difference(paired: pd.DataFrame, method: str, ratio: float, benchmark: str) -> str:
    if method in (VANILLA, VCAST):
        return MISSING
    found = paired[(paired["method"] == method) & (paired["reference"] == VCAST) & (paired["benchmark"] == benchmark)
                   & ((paired["ratio"] - ratio).abs() < 1e-6)]
    if found.empty:
        return MISSING
    row = found.iloc[0]
    return f"{signed(row['difference'])} {interval_text(row['ci_low'], row['ci_high'])}"


def _share_note(rows: pd.DataFrame, method: str, notes: list[str]) -> str:
    """A footnote mark for ``method`` (and its note appended to ``notes``) when its cells let another
    share of the video tokens into the LLM than r, or pruned further inside it; else ``""``."""
    if method == VANILLA:
        return ""
    mine = rows[rows["method"] == method]
    kept = mine[mine["benchmark"] == KEPT_PERCENT].set_index("ratio")["value"].astype(float).sort_index()
    layer = mine[mine["benchmark"] == LAYER_PERCENT].set_index("ratio")["value"].astype(float).reindex(kept.index)
    off_budget = ((kept - 100 * kept.index.to_series()).abs() > SHARE_TOLERANCE_PCT).any()
    in_llm = (layer < kept - SHARE_TOLERANCE_PCT).any()
    if not (off_budget or in_llm):
        return ""
    mark = str(len(notes) + 1).translate(SUPERSCRIPT)
    ratios = " / ".join(f"{r:g}" for r in kept.index)
    text = f"{mark} {method_name(method)}, at r = {ratios}: {_per_ratio(kept)} % of the video tokens enter the LLM"
    if in_llm:
        text += f", {_per_ratio(layer)} % per LLM layer on average (it prunes inside the LLM)"
    notes.append(text + ".")
    return mark


def _per_ratio(values: pd.Series) -> str:
    return " / ".join(f"{v:.0f}" for v in values)


def markdown_text(table: SummaryTable) -> str:
    lines = [f"*{table.title}*", "", "| " + " | ".join(table.header) + " |",
             "|---|" + "---:|" * (len(table.header) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    for note in table.notes:  # each its own paragraph: Markdown would run consecutive lines together
        lines += ["", note]
    return "\n".join(lines) + "\n"


def csv_text(table: SummaryTable) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["method", *table.header])
    for method, row in zip(table.methods, table.rows):
        writer.writerow([method, method_name(method), *row[1:]])
    return buffer.getvalue()


def write_summary(table: SummaryTable, out_stem: Path) -> list[Path]:
    """``<out_stem>-summary.md`` and ``.csv``, written atomically; returns the paths."""
    written = []
    for suffix, text in zip(SUFFIXES, (markdown_text(table), csv_text(table))):
        path = Path(out_stem).with_name(Path(out_stem).name + SUFFIX + suffix)
        atomic_write_text(path, text)
        written.append(path)
    return written
