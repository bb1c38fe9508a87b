"""Accuracy against cost: one curve per method over the grid's retention ratios, the Pareto front marked.

Panels (x axes): kept video tokens (percent of the unpruned count, ``KeptPct``), the
layer-averaged retention (``LayerAvgPct``: what in-LLM methods such as FastV really spend; it
equals the kept share for the others, so the panel is drawn only when some method differs),
the prefill latency (seconds, summed over the benchmarks' items) and the peak memory (MB,
the maximum over the benchmarks). y: the accuracy, or the mean over benchmarks when the cells
have several (the four of the paper's Average when all are there). One row of panels per
frame count.

A point is on the **Pareto front** of a panel when no other point (vanilla included) has at
most its cost and at least its accuracy, one of them strictly; the front is drawn as a grey
staircase through those points, each ringed. Vanilla is a black star with a dotted line at
its accuracy; V-CAST's points are labelled with their retention ratio.

:func:`tradeoff_points` is the data the figure draws (tests check it, not pixels); artists
carry gids ``curve:<method>:<metric>``, ``vanilla:<metric>`` and ``pareto:<metric>``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from vcast.report.collect import KEPT_PERCENT, LAYER_PERCENT, SIDE_COLUMNS, one_row_per_cell
from vcast.report.figures import ALLOCATION_COLORS, save_figure
from vcast.report.layouts import MAIN_AVERAGE, REFERENCE
from vcast.report.names import method_name, model_name

logger = logging.getLogger(__name__)

PREFILL, MEMORY = "PrefillLatency_s", "PeakMemory_MB"
METRICS = (KEPT_PERCENT, LAYER_PERCENT, PREFILL, MEMORY)
METRIC_LABELS = {
    KEPT_PERCENT: "Kept video tokens (%)",
    LAYER_PERCENT: "Layer-averaged retention (%)",
    PREFILL: "Prefill latency (s, summed over items)",
    MEMORY: "Peak memory (MB)",
}
# How a cost is combined over a point's tasks (one cell per benchmark task).
AGGREGATE = {KEPT_PERCENT: "mean", LAYER_PERCENT: "mean", PREFILL: "sum", MEMORY: "max"}
# LayerAvgPct is drawn only when some method's differs from its kept share by more than this (points).
LAYER_DIFFERS = 0.5
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "p", "*")
VCAST = "vcast"

PathLike = Union[str, Path]


def accuracy_benchmarks(frame: pd.DataFrame) -> list[str]:
    """The benchmarks averaged into y: the paper's four when all are present, else every
    benchmark column that is not a per-group breakdown (``VideoMME-Short`` ...) or a cost."""
    present = set(frame["benchmark"])
    if set(MAIN_AVERAGE) <= present:
        return list(MAIN_AVERAGE)
    return sorted(b for b in present if b not in SIDE_COLUMNS and "-" not in b)


def _pareto(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``[N]`` bool: not dominated (lower x and higher y are better). Equal points: the first wins."""
    order = sorted(range(len(x)), key=lambda i: (x[i], -y[i], i))
    front = np.zeros(len(x), dtype=bool)
    best = -np.inf
    for i in order:
        if y[i] > best:
            front[i] = True
            best = y[i]
    return front


def tradeoff_points(frame: pd.DataFrame, *, model: str, experiments: Optional[Sequence[str]] = None,
                    benchmarks: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """One row per (frames, method, ratio) with every benchmark of ``benchmarks`` finished.

    Columns: ``frames, method, ratio, accuracy, tasks`` (how many task cells), one column per
    cost of :data:`METRICS` (NaN where a cell lacks it) and ``pareto_<metric>`` (bool, among the
    points of the same frame count with that cost).
    """
    rows = frame[(frame["model"] == model) & (frame["status"] == "ok") & np.isfinite(frame["value"].astype(float))]
    if experiments:
        rows = rows[rows["experiment"].isin(list(experiments))]
    rows = one_row_per_cell(rows, ["frames", "ratio", "method", "task", "benchmark"])
    wanted = list(benchmarks) if benchmarks else accuracy_benchmarks(rows)
    if not wanted:
        raise ValueError(f"trade-off: no benchmark scores for model {model!r}")
    points = []
    for (frames, method, ratio), cell in rows.groupby(["frames", "method", "ratio"], sort=True):
        scores = cell[cell["benchmark"].isin(wanted)]
        if set(scores["benchmark"]) != set(wanted):
            logger.info("trade-off: %s at %gf r=%g lacks %s; not drawn", method, frames, ratio,
                        ", ".join(sorted(set(wanted) - set(scores["benchmark"]))))
            continue
        tasks = sorted(scores["task"].unique())
        point = {"frames": int(frames), "method": method, "ratio": float(ratio),
                 "accuracy": float(scores.groupby("benchmark")["value"].first().mean()), "tasks": len(tasks)}
        for metric in METRICS:
            values = cell[(cell["benchmark"] == metric) & cell["task"].isin(tasks)]
            point[metric] = (float(values["value"].agg(AGGREGATE[metric])) if len(values) == len(tasks)
                             else np.nan)
        points.append(point)
    table = pd.DataFrame(points, columns=["frames", "method", "ratio", "accuracy", "tasks", *METRICS])
    for metric in METRICS:
        table[f"pareto_{metric}"] = False
        for _, group in table.groupby("frames"):
            finite = group[np.isfinite(group[metric].astype(float))]
            if not finite.empty:
                table.loc[finite.index, f"pareto_{metric}"] = _pareto(finite[metric].to_numpy(float),
                                                                      finite["accuracy"].to_numpy(float))
    return table


def drawn_metrics(points: pd.DataFrame) -> list[str]:
    """The costs with a value for some pruned point; the layer-averaged one only when it differs."""
    pruned = points[points["method"] != REFERENCE]
    metrics = [m for m in METRICS if np.isfinite(pruned[m].astype(float)).any()]
    if LAYER_PERCENT in metrics:
        gap = (pruned[KEPT_PERCENT] - pruned[LAYER_PERCENT]).abs()
        if not (gap > LAYER_DIFFERS).any():
            metrics.remove(LAYER_PERCENT)
    return metrics


def _style(methods: Sequence[str]) -> dict[str, dict]:
    """Colour, marker and width per method, stable in the given order (V-CAST red and bold)."""
    import matplotlib

    palette = list(matplotlib.colormaps["tab10"].colors) + list(matplotlib.colormaps["Dark2"].colors)
    palette = [c for c in palette if c != matplotlib.colormaps["tab10"].colors[3]]  # red is V-CAST's
    styles, index = {}, 0
    for method in methods:
        if method == VCAST:
            styles[method] = {"color": ALLOCATION_COLORS["curvature"], "marker": "o", "linewidth": 2.4, "zorder": 5}
            continue
        styles[method] = {"color": palette[index % len(palette)], "marker": MARKERS[index % len(MARKERS)],
                          "linewidth": 1.4, "zorder": 3}
        index += 1
    return styles


def build_tradeoff(points: pd.DataFrame, *, model: str, y_label: str = "Accuracy (%)") -> Figure:
    """The figure of :func:`tradeoff_points` (see the module docstring)."""
    if points.empty:
        raise ValueError(f"trade-off: nothing to draw for model {model!r}")
    metrics = drawn_metrics(points)
    if not metrics:
        raise ValueError(f"trade-off: no cell of model {model!r} recorded kept tokens, latency or memory")
    frame_counts = sorted(points["frames"].unique(), reverse=True)
    methods = sorted((m for m in points["method"].unique() if m != REFERENCE),
                     key=lambda m: (m != VCAST, method_name(m).lower()))
    styles = _style(methods)
    figure = Figure(figsize=(3.6 * len(metrics), 3.3 * len(frame_counts) + 0.4), layout="constrained")
    grid = figure.subplots(len(frame_counts), len(metrics), squeeze=False)
    for row, frames in zip(grid, frame_counts):
        at = points[points["frames"] == frames]
        vanilla = at[at["method"] == REFERENCE]
        for ax, metric in zip(row, metrics):
            drawn = at[np.isfinite(at[metric].astype(float))]
            if not vanilla.empty:
                ax.axhline(float(vanilla["accuracy"].iloc[0]), color="0.3", linestyle=":", linewidth=1.0, zorder=1)
            front = drawn[drawn[f"pareto_{metric}"]].sort_values(metric)
            if len(front):
                ax.step(front[metric], front["accuracy"], where="post", color="0.55", linewidth=4.0, alpha=0.35,
                        zorder=2, gid=f"pareto:{metric}", solid_capstyle="round")
                ax.scatter(front[metric], front["accuracy"], s=150, facecolors="none", edgecolors="0.25",
                           linewidths=1.0, zorder=6)
            for method in methods:
                curve = drawn[drawn["method"] == method].sort_values("ratio")
                if curve.empty:
                    continue
                style = styles[method]
                ax.plot(curve[metric], curve["accuracy"], color=style["color"], marker=style["marker"],
                        markersize=6 if method == VCAST else 5, linewidth=style["linewidth"], zorder=style["zorder"],
                        label=method_name(method), gid=f"curve:{method}:{metric}")
                if method == VCAST:  # which ratio each point is (V-CAST's only, to stay readable)
                    for x, y, ratio in zip(curve[metric], curve["accuracy"], curve["ratio"]):
                        ax.annotate(f"{ratio * 100:g}%", xy=(x, y), xytext=(5, -10), textcoords="offset points",
                                    fontsize=7, color=style["color"])
            van = vanilla[np.isfinite(vanilla[metric].astype(float))]
            if not van.empty:
                ax.plot(van[metric], van["accuracy"], linestyle="none", marker="*", markersize=13, color="black",
                        zorder=7, label=method_name(REFERENCE), gid=f"vanilla:{metric}")
            if drawn.empty:
                ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
            ax.set_xlabel(METRIC_LABELS[metric])
            ax.grid(alpha=0.3)
            ax.margins(x=0.06, y=0.1)  # the vanilla star and the rings sit at the edges
            if len(at) and at["accuracy"].max() - at["accuracy"].min() < 1.0:  # all equal (random weights)
                ax.set_ylim(at["accuracy"].min() - 2.0, at["accuracy"].max() + 2.0)
            if metric in (KEPT_PERCENT, LAYER_PERCENT):
                ax.set_xlim(0, 106)
        row[0].set_ylabel(f"{y_label}\n{frames} frames" if len(frame_counts) > 1 else y_label)
    figure.suptitle(f"{model_name(model)}: accuracy vs cost (one curve per method over its retention ratios, "
                    "V-CAST's labelled; ringed: Pareto front)", fontsize=10)
    handles = [Line2D([], [], color=styles[m]["color"], marker=styles[m]["marker"], linewidth=styles[m]["linewidth"])
               for m in methods]
    labels = [method_name(m) for m in methods]
    if (points["method"] == REFERENCE).any():
        handles.insert(0, Line2D([], [], color="black", marker="*", markersize=11, linestyle=":"))
        labels.insert(0, method_name(REFERENCE))
    handles.append(Line2D([], [], color="0.55", linewidth=4.0, alpha=0.35, marker="o", markerfacecolor="none",
                          markeredgecolor="0.25", markersize=9))
    labels.append("Pareto front")
    figure.legend(handles, labels, loc="outside lower center", ncol=min(6, len(labels)), frameon=False, fontsize=8)
    return figure


def plot_tradeoff(frame: pd.DataFrame, out_stem: PathLike, *, model: str,
                  experiments: Optional[Sequence[str]] = None,
                  benchmarks: Optional[Sequence[str]] = None) -> list[Path]:
    """``<out_stem>.png`` and ``.pdf`` of the trade-off figure; returns their paths."""
    points = tradeoff_points(frame, model=model, experiments=experiments, benchmarks=benchmarks)
    used = list(benchmarks) if benchmarks else accuracy_benchmarks(
        frame[(frame["model"] == model) & (frame["status"] == "ok")])
    y_label = f"{used[0]} accuracy (%)" if len(used) == 1 else f"Average of {len(used)} benchmarks (%)"
    return save_figure(build_tradeoff(points, model=model, y_label=y_label), out_stem)
