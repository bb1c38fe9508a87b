"""A built :class:`~vcast.report.tables.Table` as CSV, LaTeX (booktabs, the paper's layout) and Markdown.

CSV: one row per (frames, ratio, method), the layout's columns by their paper names
(``MVBench ... Average, Average%``; the efficiency table ``PrefillLatency_s ... Performance``);
``OOM`` for a cell that ran out of memory, ``failed`` for a failed one, empty where there is no
cell. With ``--intervals``, ``<column>_pm`` holds each value's ``±`` half-width (printed as
``69.2 ± 1.3`` in Markdown and LaTeX). A table with partial (smoke-run, ``limit``) cells gets a last ``limit`` column, and marks
their rows ``†`` in LaTeX and Markdown with a footnote naming the cells. With a comparison (``--compare paper``: the published numbers; ``--compare clean``: the same
grid run with ``variant="paper"``), ``<column>_vs_<name>`` holds this table's printed value minus
the other one.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Optional

from vcast.atomic_files import atomic_write_text
from vcast.report.layouts import Column, Layout
from vcast.report.names import latex
from vcast.report.comparison import Comparison
from vcast.report.tables import Entry, Table, round_half_up

MISSING = "–"
PARTIAL_MARK = " †"  # a row from a partial (smoke) run
DAGGER = r"$^\dagger$"
GREY = r"\textcolor[rgb]{.502,.502,.502}"
HIGHLIGHT = r"\rowcolor[rgb]{0.992,0.961,0.973}"
HIGHLIGHTED_METHOD = "vcast"


def printed_value(entry: Entry, column: Column) -> str:
    state = entry.states.get(column.key, "missing")
    if state == "oom":
        return "OOM"
    if state != "ok":
        return MISSING
    return f"{round_half_up(entry.values[column.key], column.digits):.{column.digits}f}"


def vs_paper(paper: Comparison, table: Table, entry: Entry, column: Column) -> Optional[float]:
    """Our printed value minus the other one (both as the table prints them), or None."""
    published = paper.value(entry.paper_table, table.layout, entry, column.key)
    ours = entry.values.get(column.key, math.nan)
    if published is None or entry.states.get(column.key) != "ok":
        return None
    return round_half_up(round_half_up(ours, column.digits) - published, column.digits) + 0.0  # no "-0.0"


def csv_text(table: Table, paper: Optional[Comparison] = None) -> str:
    """The table as CSV text (see the module docstring)."""
    columns = table.layout.columns
    header = ["frames", "ratio", "method", *(c.key for c in columns)]
    if paper is not None:
        header += [f"{c.key}_vs_{paper.name}" for c in columns]
    intervals = [c for c in columns if any(c.key in entry.intervals for entry in table.rows)]
    header += [f"{c.key}_pm" for c in intervals]  # --intervals: the ± half-width of each value
    partial = bool(table.partial)
    if partial:
        header.append("limit")  # a smoke run's items per task; empty for a full run
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    seen = set()
    for entry in table.rows:
        key = (entry.frames, entry.ratio, entry.method)
        if key in seen:
            continue  # the same cell shown in two sections (the default V-CAST in both sensitivity studies)
        seen.add(key)
        values = []
        for column in columns:
            state = entry.states.get(column.key, "missing")
            values.append(f"{entry.values[column.key]:.4f}".rstrip("0").rstrip(".") if state == "ok"
                          else {"oom": "OOM", "failed": "failed"}.get(state, ""))
        row = [entry.frames, f"{entry.ratio:g}", entry.method, *values]
        if paper is not None:
            for column in columns:
                diff = vs_paper(paper, table, entry, column)
                row.append("" if diff is None else f"{diff:+.{column.digits}f}")
        for column in intervals:
            width = entry.intervals.get(column.key)
            row.append("" if width is None or entry.states.get(column.key) != "ok"
                       else f"{width:.4f}".rstrip("0").rstrip("."))
        if partial:
            row.append(f"{max(entry.partial.values()):g}" if entry.partial else "")
        writer.writerow(row)
    return out.getvalue()


def _marked(entry: Entry, column: Column, text: str, best: str, second: str) -> str:
    """``text`` wrapped in the ``best`` / ``second`` template (``{}`` is the text) per its mark."""
    template = {"best": best, "second": second}.get(entry.marks.get(column.key, ""), "{}")
    return template.replace("{}", text)


def _half_width(entry: Entry, column: Column) -> Optional[str]:
    """The cell's ``±`` half-width as printed (``--intervals``), or None."""
    width = entry.intervals.get(column.key)
    if width is None or entry.states.get(column.key) != "ok":
        return None
    return f"{round_half_up(width, column.digits):.{column.digits}f}"


def _md_cell(entry: Entry, column: Column) -> str:
    text = _marked(entry, column, printed_value(entry, column), "**{}**", "<u>{}</u>")
    width = _half_width(entry, column)
    text = f"{text} ± {width}" if width is not None else text
    note = entry.notes.get(column.key)
    return f"{text} ({note})" if note else text


def _md_header(column: Column) -> str:
    return f"{column.group} {column.header}" if column.group else column.header


def markdown_text(table: Table, paper: Optional[Comparison] = None) -> str:
    """The table as a GitHub Markdown table; best **bold**, second <u>underlined</u>."""
    layout = table.layout
    lines = [f"**{layout.label}** — {layout.caption} Model: `{table.model}`.", ""]
    lines.append("| Method | " + " | ".join(_md_header(c) for c in layout.columns) + " |")
    lines.append("|---|" + "---:|" * len(layout.columns))
    blank = " |" * len(layout.columns)
    for entry in table.entries:
        if entry.kind == "section":
            lines.append(f"| **{entry.title}** |{blank}")
        elif entry.kind == "block":
            lines.append(f"| *{entry.title}* |{blank}")
        else:
            label = f"*{entry.label}*" if entry.reference else entry.label
            label += PARTIAL_MARK if entry.partial else ""
            lines.append(f"| {label} | " + " | ".join(_md_cell(entry, c) for c in layout.columns) + " |")
    if paper is not None:
        lines += ["", f"{paper.caption}:", "",
                  "| Method | frames | ratio | " + " | ".join(_md_header(c) for c in layout.columns) + " |",
                  "|---|---:|---:|" + "---:|" * len(layout.columns)]
        for entry in table.rows:
            cells = []
            for column in layout.columns:
                diff = vs_paper(paper, table, entry, column)
                cells.append(MISSING if diff is None else f"{diff:+.{column.digits}f}")
            lines.append(f"| {entry.label} | {entry.frames} | {entry.ratio:g} | " + " | ".join(cells) + " |")
    notes = table.footnotes()
    if notes:
        lines += ["", *(f"*{note}*" for note in notes)]
    return "\n".join(lines) + "\n"


def _tex_cell(entry: Entry, column: Column) -> str:
    text = printed_value(entry, column).replace(MISSING, "-").replace("%", r"\%")
    text = _marked(entry, column, text, r"\textbf{{}}", r"\underline{{}}")
    width = _half_width(entry, column)
    if width is not None:
        text += rf"{{\scriptsize$\pm${width}}}"
    note = entry.notes.get(column.key)
    if note:
        note = note.replace("%", r"\%").replace("×", r"$\times$")
        text += rf" {{\tiny ({note})}}"
    return rf"{GREY}{{{text}}}" if entry.reference else text


def _tex_header(layout: Layout) -> list[str]:
    """Two header lines: plain columns span both (multirow), grouped ones share a multicolumn."""
    first, second, rules = [r"\multirow{2}{*}{\textbf{Methods}}"], [""], []
    columns = list(layout.columns)
    index = 0
    while index < len(columns):
        column = columns[index]
        if column.group is None:
            first.append(rf"\multirow{{2}}{{*}}{{\textbf{{{column.header}}}}}")
            second.append("")
            index += 1
            continue
        span = 1
        while index + span < len(columns) and columns[index + span].group == column.group:
            span += 1
        first.append(rf"\multicolumn{{{span}}}{{c}}{{\textbf{{{column.group}}}}}")
        rules.append(rf"\cmidrule(lr){{{index + 2}-{index + span + 1}}}")
        second.extend(rf"\textbf{{{c.header.replace('%', chr(92) + '%')}}}" for c in columns[index:index + span])
        index += span
    return [" & ".join(first) + r" \\", " ".join(rules), " & ".join(second) + r" \\"]


def latex_text(table: Table) -> str:
    """The table as a LaTeX ``table*`` (needs booktabs, multirow, xcolor with the table option)."""
    layout = table.layout
    width = len(layout.columns) + 1
    lines = [
        f"% {layout.label} rebuilt by vcast.report from model {table.model}.",
        r"% Needs \usepackage{booktabs,multirow,graphicx} and \usepackage[table]{xcolor} (graphicx: \resizebox).",
        r"\begin{table*}[!t]",
        rf"\caption{{{layout.caption.replace('%', chr(92) + '%')}}}",
        r"\resizebox{\textwidth}{!}{",
        rf"\begin{{tabular}}{{l{'c' * len(layout.columns)}}}",
        r"\toprule",
        *_tex_header(layout),
        r"\midrule",
    ]
    previous = "header"
    for entry in table.entries:
        if entry.kind == "section":
            if previous != "header":
                lines.append(r"\midrule")
            lines += [rf"\multicolumn{{{width}}}{{c}}{{\textbf{{\textit{{{entry.title}}}}}}} \\", r"\midrule"]
        elif entry.kind == "block":
            title = entry.title.replace("%", r"\%")
            if previous == "row":
                lines.append(r"\midrule")
            lines.append(rf"\multicolumn{{{width}}}{{l}}{{\textit{{{title}}}}} \\")
        else:
            label = rf"{GREY}{{{entry.latex_label}}}" if entry.reference else entry.latex_label
            label += DAGGER if entry.partial else ""
            if entry.method == HIGHLIGHTED_METHOD and not entry.reference:
                lines.append(HIGHLIGHT)
            lines.append(" & ".join([label, *(_tex_cell(entry, c) for c in layout.columns)]) + r" \\")
            if entry.reference:
                lines.append(r"\midrule")
                previous = "header"  # the rule after the reference row also opens the first block
                continue
        previous = entry.kind
    lines += [r"\bottomrule", r"\end{tabular}", "}"]
    for note in table.footnotes():
        text = latex(note).replace("†", DAGGER).replace("±", r"$\pm$")
        lines.append(rf"\par{{\footnotesize {text}}}")
    lines += [rf"\label{{{layout.label}}}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def write_table(table: Table, out_stem: Path, paper: Optional[Comparison] = None) -> list[Path]:
    """``<out_stem>.csv``, ``.tex`` and ``.md``, each written atomically; returns the paths."""
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, text in ((".csv", csv_text(table, paper)), (".tex", latex_text(table)),
                         (".md", markdown_text(table, paper))):
        path = out_stem.with_name(out_stem.name + suffix)
        atomic_write_text(path, text)
        written.append(path)
    return written
