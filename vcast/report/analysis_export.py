"""The per-sample analysis (:func:`vcast.report.analysis.compare_all`) as CSV, Markdown and LaTeX.

CSV: every comparison row with full precision (:data:`vcast.report.analysis.COMPARISON_COLUMNS`).
Markdown and LaTeX: one table per (model, frame count), one row per (ratio, method, benchmark):
the score on the matched items, loyalty and flips against vanilla, then the difference to
vanilla and to V-CAST with its paired bootstrap interval and McNemar's p. Files are written
atomically, ``<stem>-analysis.{csv,md,tex}`` next to the tables.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import pandas as pd

from vcast.atomic_files import atomic_write_text
from vcast.report.analysis import VANILLA, VCAST
from vcast.report.names import latex, method_name, model_name

MISSING = "–"
MINUS = "−"
SUFFIX = "-analysis"


def signed(value: float, digits: int = 1) -> str:
    text = f"{value:+.{digits}f}"
    return "0.0" if text in ("+0.0", "-0.0") else text.replace("-", MINUS)


def _p(value: float) -> str:
    if not math.isfinite(value):
        return MISSING
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def interval_text(low: float, high: float) -> str:
    return f"[{signed(low)}, {signed(high)}]"


def _reference_cells(row: Optional[pd.Series], with_loyalty: bool) -> list[str]:
    if row is None:
        return [MISSING] * (6 if with_loyalty else 3)
    cells = [f"{row['loyalty']:.1f}", str(int(row["right_to_wrong"])), str(int(row["wrong_to_right"]))] \
        if with_loyalty else []
    return cells + [signed(row["difference"]), interval_text(row["ci_low"], row["ci_high"]), _p(row["p_mcnemar"])]


HEADER = ["Method", "Ratio", "Benchmark", "Items", "Score", "Loyalty %", "R→W", "W→R",
          "Δ vs Vanilla", "95% CI", "p", "Δ vs V-CAST", "95% CI", "p"]


def analysis_rows(frame: pd.DataFrame) -> dict[tuple[str, int], list[list[str]]]:
    """``{(model, frames): rows of printed cells}`` in :data:`HEADER` order (plain text)."""
    out: dict[tuple[str, int], list[list[str]]] = {}
    if frame.empty:
        return out
    keys = ["model", "frames", "ratio", "method", "benchmark"]
    by_reference = {ref: {tuple(r[k] for k in keys): r for _, r in frame[frame["reference"] == ref].iterrows()}
                    for ref in (VANILLA, VCAST)}
    rows = frame.drop_duplicates(keys)
    rows = rows.assign(_name=rows["method"].map(method_name)).sort_values(
        ["model", "frames", "ratio", "_name", "benchmark"], ascending=[True, False, False, True, True], kind="stable")
    for _, row in rows.iterrows():
        key = tuple(row[k] for k in keys)
        vanilla, vcast = by_reference[VANILLA].get(key), by_reference[VCAST].get(key)
        first = vanilla if vanilla is not None else vcast
        printed = [method_name(row["method"]) + (" †" if first["partial"] else ""), f"{row['ratio']:g}",
                   row["benchmark"], str(int(first["items"])), f"{first['score']:.1f}",
                   *_reference_cells(vanilla, True), *_reference_cells(vcast, False)]
        out.setdefault((row["model"], int(row["frames"])), []).append(printed)
    return out


def _caption(frame: pd.DataFrame) -> str:
    first = frame.iloc[0]
    return (f"Paired bootstrap {100 * first['level']:g}% intervals ({int(first['resamples'])} resamples, seed "
            f"{int(first['seed'])}, percentile); p: McNemar's exact two-sided test; loyalty and flips (R→W: "
            "right under vanilla, wrong under the method; W→R: the reverse) against vanilla; scores on the "
            "items both runs have.")


def markdown_analysis(frame: pd.DataFrame, title: str) -> str:
    """The analysis as GitHub Markdown (see the module docstring)."""
    lines = [f"**Per-sample analysis: {title}**", ""]
    if frame.empty:
        return "\n".join(lines + ["No method cell has a reference cell (vanilla or V-CAST) to compare with.", ""])
    lines += [_caption(frame), ""]
    for (model, frames), rows in analysis_rows(frame).items():
        lines += [f"*{model_name(model)}, {frames} frames*", "",
                  "| " + " | ".join(HEADER) + " |", "|---|---:|---|" + "---:|" * (len(HEADER) - 3)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    if frame["partial"].any():
        lines += ["*† a partial run (limit) is behind the row.*", ""]
    return "\n".join(lines)


def latex_analysis(frame: pd.DataFrame, title: str) -> str:
    """The analysis as LaTeX ``table*`` environments (booktabs), one per (model, frames)."""
    lines = ["% Per-sample analysis rebuilt by vcast.report. Needs \\usepackage{booktabs,graphicx}."]
    if frame.empty:
        return "\n".join(lines + ["% no comparisons"]) + "\n"
    header = [latex(h).replace("→", r"$\to$").replace("Δ", r"$\Delta$") for h in HEADER]
    for (model, frames), rows in analysis_rows(frame).items():
        lines += [r"\begin{table*}[!t]",
                  rf"\caption{{{latex(f'{title}: {model_name(model)}, {frames} frames. ' + _caption(frame))}}}"
                  .replace("→", r"$\to$"),
                  r"\resizebox{\textwidth}{!}{", rf"\begin{{tabular}}{{llcrr{'r' * (len(HEADER) - 5)}}}",
                  r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
        for row in rows:
            cells = [latex(cell).replace(MINUS, "$-$").replace("<", r"$<$").replace("†", r"$^\dagger$")
                     .replace(MISSING, "--") for cell in row]
            lines.append(" & ".join(cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", "}", r"\end{table*}", ""]
    return "\n".join(lines)


def write_analysis(frame: pd.DataFrame, out_stem: Path, title: str) -> list[Path]:
    """``<out_stem>-analysis.{csv,md,tex}``, each written atomically; returns the paths."""
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, text in ((".csv", frame.to_csv(index=False)), (".md", markdown_analysis(frame, title)),
                         (".tex", latex_analysis(frame, title))):
        path = out_stem.with_name(out_stem.name + SUFFIX + suffix)
        atomic_write_text(path, text)
        written.append(path)
    return written
