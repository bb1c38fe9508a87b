"""The paper's figures from the tidy results frame (and, for the budget profiles, from a model).

Every ``plot_*`` function writes ``<out_stem>.png`` and ``<out_stem>.pdf`` atomically and returns
their paths; the ``build_*`` function behind it returns the :class:`matplotlib.figure.Figure`
(no pyplot, so no global state), which is what the tests inspect.

The tidy frame has one row per (cell, benchmark) with the columns :data:`REQUIRED_COLUMNS`
(see :mod:`vcast.report.collect`). Rows with ``status == "ok"`` and a finite value are plotted;
``"oom"`` rows are drawn as OOM markers where the figure has them; the rest are skipped. A figure
with some data plots what it has; a figure with none raises ``ValueError`` saying what was asked.

Artists carry a ``gid`` naming what they show (``"line:<method>"``, ``"oom:<method>"``,
``"bar:<method>:<benchmark or metric>"``, ``"profile:<allocation>"``) so tests and callers can
find them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from vcast.report.figure_common import (ALLOCATION_COLORS, FRAME_SCALING_EXPERIMENT, GAIN_COLORS,
                                        METRIC_LABELS, MINUS, OK, OOM, OOM_STEP, OOM_Y, PathLike, figure_cells,
                                        no_data, ordered_methods, pct, save_figure)
from vcast.report.layouts import REFERENCE
from vcast.report.names import method_name, model_name


logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# fig:frame_scaling
# ---------------------------------------------------------------------------------------------

def frame_scaling_methods() -> list[str]:
    """The methods of ``configs/experiment/frame_scaling.yaml`` (the figure plots that grid)."""
    import yaml

    config = yaml.safe_load(FRAME_SCALING_EXPERIMENT.read_text(encoding="utf-8"))
    return [m.strip() for m in str(config["hydra"]["sweeper"]["params"]["method"]).split(",")]


def build_frame_scaling(df: pd.DataFrame, *, model: str = "qwen3vl_8b", ratio: float = 0.25,
                        benchmarks: Sequence[str] = ("LongVideoBench", "MLVU", "VideoMME-Long", "EgoSchema"),
                        methods: Optional[Sequence[str]] = None) -> Figure:
    """Accuracy against frame count, one panel per benchmark, one line per method.

    Vanilla is taken at ratio 1, every other method at ``ratio``; ``methods=None`` means the
    methods of the ``frame_scaling`` experiment (:func:`frame_scaling_methods`), so ablation
    rows at the same ratio stay out. OOM cells are an ``x`` at the bottom of the panel,
    labelled ``OOM``; failed and missing cells are skipped.
    """
    wanted = [REFERENCE] + [m for m in (methods or frame_scaling_methods()) if m != REFERENCE]
    cells = figure_cells(df, model=model, methods=wanted, ratio=ratio, benchmarks=benchmarks)
    if cells.empty:
        raise no_data("frame_scaling", model=model, ratio=ratio, methods=wanted, benchmarks=list(benchmarks))
    lines = ordered_methods([m for m in wanted if m in set(cells["method"])])
    frame_ticks = sorted(int(f) for f in cells["frames"].unique())
    colors = {method: "black" if method == REFERENCE else f"C{index}" for index, method in enumerate(lines)}
    styles = {method: "--" if method == REFERENCE else "-" for method in lines}

    figure = Figure(figsize=(3.2 * len(benchmarks), 3.4), layout="constrained")
    axes = figure.subplots(1, len(benchmarks), squeeze=False)[0]
    for ax, benchmark in zip(axes, benchmarks):
        panel = cells[cells["benchmark"] == benchmark]
        bottom = blended_transform_factory(ax.transData, ax.transAxes)
        stacked: dict[int, int] = {}
        for method in lines:
            rows = panel[panel["method"] == method].sort_values("frames")
            ok = rows[rows["status"] == OK]
            if not ok.empty:
                ax.plot(ok["frames"].to_numpy(int), ok["value"].to_numpy(float), marker="o", markersize=4,
                        color=colors[method], linestyle=styles[method], label=method_name(method),
                        gid=f"line:{method}",
                        linewidth=2.2 if method == "vcast" else 1.4)
            for frames in rows.loc[rows["status"] == OOM, "frames"].astype(int):
                level = stacked.get(frames, 0)
                stacked[frames] = level + 1
                ax.plot([frames], [OOM_Y + OOM_STEP * level], marker="x", markersize=7, markeredgewidth=2,
                        linestyle="none", color=colors[method], transform=bottom, clip_on=False,
                        gid=f"oom:{method}")
        for frames, count in stacked.items():
            ax.annotate("OOM", xy=(frames, OOM_Y + OOM_STEP * (count - 1)), xycoords=bottom, xytext=(0, 6),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7, color="0.25")
        if panel.empty:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
        ax.set_xscale("log", base=2)
        ax.set_xticks(frame_ticks, [str(f) for f in frame_ticks])
        ax.minorticks_off()
        ax.set_title(benchmark)
        ax.set_xlabel("Frames")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Accuracy (%)")
    figure.suptitle(f"{model_name(model)}, R = {pct(ratio)}")
    # Proxies, so a method that only ever ran out of memory still has its entry.
    handles = [Line2D([], [], color=colors[m], linestyle=styles[m], marker="o", markersize=4) for m in lines]
    figure.legend(handles, [method_name(m) for m in lines], loc="outside lower center", ncol=len(lines), frameon=False)
    return figure


def plot_frame_scaling(df: pd.DataFrame, out_stem: PathLike, *, model: str = "qwen3vl_8b", ratio: float = 0.25,
                       benchmarks: Sequence[str] = ("LongVideoBench", "MLVU", "VideoMME-Long", "EgoSchema"),
                       methods: Optional[Sequence[str]] = None) -> list[Path]:
    """fig:frame_scaling as PNG and PDF (see :func:`build_frame_scaling`)."""
    return save_figure(build_frame_scaling(df, model=model, ratio=ratio, benchmarks=benchmarks, methods=methods),
                       out_stem)


# ---------------------------------------------------------------------------------------------
# fig:ablation_budget_others
# ---------------------------------------------------------------------------------------------

def _no_bar(ax: Axes, x: float, what: str) -> None:
    """Mark a bar slot without a value ("no data" written upright at the axis), so a missing cell
    never reads as a bar of height zero."""
    ax.text(x, 0.02, "no data", transform=blended_transform_factory(ax.transData, ax.transAxes), rotation=90,
            ha="center", va="bottom", fontsize=6, color="0.45", gid=f"nodata:{what}")


def _bar_label(ax: Axes, x: float, top: float, text: str, color: str = "0.15") -> None:
    ax.annotate(text, xy=(x, top), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                fontsize=8, color=color)


def build_budget_gains(df: pd.DataFrame, *, model: str = "qwen3vl_8b", frames: int = 32, ratio: float = 0.25,
                       pairs: Sequence[tuple[str, str]] = (("visionzip", "visionzip_vcast"),
                                                           ("vidcom2", "vidcom2_vcast")),
                       benchmarks: Sequence[str] = ("MVBench", "LongVideoBench", "MLVU", "VideoMME")) -> Figure:
    """One panel per (original, original + V-CAST budgeting) pair: grouped bars per benchmark,
    the gain (``+V-CAST - original``, in points) written above each group that has both."""
    methods = [method for pair in pairs for method in pair]
    cells = figure_cells(df, model=model, methods=methods, ratio=ratio, benchmarks=benchmarks, frames=frames)
    cells = cells[cells["status"] == OK]
    if cells.empty:
        raise no_data("budget_gains", model=model, frames=frames, ratio=ratio, methods=methods,
                       benchmarks=list(benchmarks))
    value = {(row.method, row.benchmark): float(row.value) for row in cells.itertuples()}

    figure = Figure(figsize=(4.2 * len(pairs), 3.4), layout="constrained")
    axes = figure.subplots(1, len(pairs), squeeze=False)[0]
    width = 0.38
    x = np.arange(len(benchmarks), dtype=float)
    for ax, (original, budgeted) in zip(axes, pairs):
        for offset, method, color in ((-width / 2, original, GAIN_COLORS[0]), (width / 2, budgeted, GAIN_COLORS[1])):
            for index, benchmark in enumerate(benchmarks):
                if (method, benchmark) in value:
                    ax.bar(x[index] + offset, value[(method, benchmark)], width, color=color,
                           gid=f"bar:{method}:{benchmark}")
                else:
                    _no_bar(ax, x[index] + offset, f"{method}:{benchmark}")
        for index, benchmark in enumerate(benchmarks):
            if (original, benchmark) in value and (budgeted, benchmark) in value:
                gain = value[(budgeted, benchmark)] - value[(original, benchmark)]
                top = max(value[(budgeted, benchmark)], value[(original, benchmark)])
                text = f"{gain:+.1f}".replace("-", MINUS)
                _bar_label(ax, x[index], top, text, color="tab:green" if gain >= 0 else "tab:red")
        present = [v for (m, _), v in value.items() if m in (original, budgeted)]
        if present:
            # Zoom on the bars' range (accuracies sit close together) with room for the labels.
            low, high = min(present), max(present)
            span = max(high - low, 1.0)
            ax.set_ylim(max(0.0, low - 0.6 * span), high + 0.35 * span)
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
        ax.set_xticks(x, list(benchmarks), rotation=15)
        ax.set_title(method_name(original), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("Accuracy (%)")
    figure.suptitle(f"{model_name(model)}, {frames} frames, R = {pct(ratio)}")
    handles = [Patch(color=color) for color in GAIN_COLORS]
    figure.legend(handles, ["Original", "+ V-CAST budgeting"], loc="outside lower center", ncol=2, frameon=False)
    return figure


def plot_budget_gains(df: pd.DataFrame, out_stem: PathLike, *, model: str = "qwen3vl_8b", frames: int = 32,
                      ratio: float = 0.25,
                      pairs: Sequence[tuple[str, str]] = (("visionzip", "visionzip_vcast"),
                                                          ("vidcom2", "vidcom2_vcast")),
                      benchmarks: Sequence[str] = ("MVBench", "LongVideoBench", "MLVU", "VideoMME")) -> list[Path]:
    """fig:ablation_budget_others as PNG and PDF (see :func:`build_budget_gains`)."""
    return save_figure(build_budget_gains(df, model=model, frames=frames, ratio=ratio, pairs=pairs,
                                          benchmarks=benchmarks), out_stem)


# ---------------------------------------------------------------------------------------------
# fig:llava_ov_efficiency
# ---------------------------------------------------------------------------------------------

def relative_to_vanilla(metric: str, value: float, reference: float) -> str:
    """The annotation of one efficiency bar against vanilla's ``reference``.

    Latencies (``*_s``): speed-up ``reference / value`` as ``"3.6×"``; throughput: ``value /
    reference`` as ``"1.8×"``; anything else (memory): the change in percent, ``"−11.4%"``.
    """
    if metric.startswith("Throughput"):
        return f"{value / reference:.1f}\u00d7"
    if metric.endswith("_s"):
        return f"{reference / value:.1f}\u00d7"
    return f"{(value / reference - 1.0) * 100:+.1f}%".replace("-", MINUS)


def build_efficiency_bars(df: pd.DataFrame, *, model: str = "llava_ov_7b", frames: int = 32, ratio: float = 0.25,
                          task: str = "videomme",
                          methods: Sequence[str] = ("vanilla", "fastvid", "vidcom2", "vcast"),
                          metrics: Sequence[str] = ("PrefillLatency_s", "TotalLatency_s", "PeakMemory_MB")) -> Figure:
    """One bar panel per efficiency metric, one bar per method, each non-vanilla bar annotated
    with its speed-up or memory change against vanilla (when vanilla's value is there)."""
    cells = figure_cells(df, model=model, methods=methods, ratio=ratio, benchmarks=metrics, frames=frames, task=task)
    cells = cells[cells["status"] == OK]
    if cells.empty:
        raise no_data("efficiency_bars", model=model, frames=frames, ratio=ratio, task=task, methods=list(methods),
                       metrics=list(metrics))
    value = {(row.method, row.benchmark): float(row.value) for row in cells.itertuples()}
    colors = {method: (ALLOCATION_COLORS["curvature"] if method == "vcast" else "0.35" if method == REFERENCE
                       else f"C{index}") for index, method in enumerate(methods)}

    figure = Figure(figsize=(3.0 * len(metrics), 3.2), layout="constrained")
    axes = figure.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        reference = value.get((REFERENCE, metric))
        shown = []
        for index, method in enumerate(methods):
            if (method, metric) not in value:
                _no_bar(ax, index, f"{method}:{metric}")
                continue
            height = value[(method, metric)]
            shown.append(height)
            ax.bar(index, height, 0.7, color=colors[method], label=method_name(method), gid=f"bar:{method}:{metric}")
            if method != REFERENCE and reference is not None and height > 0 and reference > 0:
                _bar_label(ax, index, height, relative_to_vanilla(metric, height, reference))
        if shown:
            ax.set_ylim(0, max(shown) * 1.18)
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
        ax.set_xticks(range(len(methods)), [method_name(m) for m in methods], rotation=20)
        ax.set_title(METRIC_LABELS.get(metric, metric), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    figure.suptitle(f"{model_name(model)} on {task}, {frames} frames, R = {pct(ratio)}")
    return figure


def plot_efficiency_bars(df: pd.DataFrame, out_stem: PathLike, *, model: str = "llava_ov_7b", frames: int = 32,
                         ratio: float = 0.25, task: str = "videomme",
                         methods: Sequence[str] = ("vanilla", "fastvid", "vidcom2", "vcast"),
                         metrics: Sequence[str] = ("PrefillLatency_s", "TotalLatency_s", "PeakMemory_MB"),
                         ) -> list[Path]:
    """fig:llava_ov_efficiency as PNG and PDF (see :func:`build_efficiency_bars`)."""
    return save_figure(build_efficiency_bars(df, model=model, frames=frames, ratio=ratio, task=task,
                                             methods=methods, metrics=metrics), out_stem)
