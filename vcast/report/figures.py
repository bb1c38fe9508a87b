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

import io
import logging
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from vcast.atomic_files import atomic_write_bytes
from vcast.budget_profiles import ALLOCATION_LABELS, step_name
from vcast.report.collect import one_row_per_cell
from vcast.report.layouts import REFERENCE
from vcast.report.scoring import CONFIG_DIR
from vcast.report.names import method_name, model_name

logger = logging.getLogger(__name__)

REQUIRED_COLUMNS = ("model", "frames", "ratio", "method", "benchmark", "value", "status")
OK, OOM = "ok", "oom"
FORMATS = ("png", "pdf")
PNG_DPI = 200

# Allocation -> colour of fig:temporal_allocation.
ALLOCATION_COLORS: dict[str, tuple[float, float, float]] = {
    "uniform": (0.557, 0.576, 0.596),
    "uniqueness": (0.400, 0.722, 0.502),
    "curvature": (0.851, 0.353, 0.373),
}
# Compared method -> colour of fig:budget_analysis (its caption's: grey uniform, orange segment-based,
# blue global uniqueness; V-CAST keeps its curvature red).
ANALYSIS_COLORS: dict[str, tuple[float, float, float]] = {
    "visionzip": (0.5, 0.5, 0.5),
    "fastvid": (0.8, 0.4, 0.1),
    "holitom": (0.9, 0.6, 0.2),
    "vidcom2": (0.2, 0.4, 0.7),
}
GAIN_COLORS = ("0.65", ALLOCATION_COLORS["curvature"])  # original, + V-CAST budgeting
METHOD_ORDER = ("vanilla", "visionzip", "vidcom2", "fastvid", "holitom", "flashvid", "vcast",
                "visionzip_vcast", "vidcom2_vcast")
FRAME_SCALING_EXPERIMENT = CONFIG_DIR / "experiment" / "frame_scaling.yaml"
METRIC_LABELS = {
    "PrefillLatency_s": "Prefill latency (s)",
    "GenerationLatency_s": "Generation latency (s)",
    "TotalLatency_s": "Total latency (s)",
    "PeakMemory_MB": "Peak memory (MB)",
    "Throughput_items_per_s": "Throughput (items/s)",
}
MINUS = "\u2212"  # typographic minus for the annotations
OOM_Y = 0.05  # axes fraction of the lowest OOM marker
OOM_STEP = 0.07  # markers of several methods at one frame count stack upwards

PathLike = Union[str, Path]


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def save_figure(figure: Figure, out_stem: PathLike) -> list[Path]:
    """Write ``<out_stem>.png`` and ``<out_stem>.pdf``; returns their paths.

    Dates and tool versions are left out of the metadata, so the same figure gives the same bytes.
    """
    out_stem = Path(out_stem)
    written = []
    for fmt in FORMATS:
        path = out_stem.parent / f"{out_stem.name}.{fmt}"
        buffer = io.BytesIO()
        metadata = {"CreationDate": None, "Producer": None} if fmt == "pdf" else {"Software": None}
        # tight: a wide legend under a single narrow panel must not be clipped
        figure.savefig(buffer, format=fmt, dpi=PNG_DPI, metadata=metadata, bbox_inches="tight")
        atomic_write_bytes(path, buffer.getvalue())
        written.append(path)
    logger.info("wrote %s", ", ".join(map(str, written)))
    return written


# ---------------------------------------------------------------------------------------------
# Selecting cells
# ---------------------------------------------------------------------------------------------

def _check_columns(df: pd.DataFrame) -> None:
    missing = [column for column in REQUIRED_COLUMNS if column not in df.columns]
    if missing:
        raise ValueError(f"the results frame lacks column(s) {missing}; it has {list(df.columns)}")


def _cells(df: pd.DataFrame, *, model: str, methods: Sequence[str], ratio: float, benchmarks: Sequence[str],
           frames: Optional[int] = None, task: Optional[str] = None) -> pd.DataFrame:
    """One row per (method, frames, benchmark): vanilla at ratio 1, the others at ``ratio``.

    The same cell can appear in several experiments (grids overlap): the rule of
    :func:`vcast.report.collect.one_row_per_cell` picks one. Failed cells are dropped.
    """
    _check_columns(df)
    at_ratio = np.where(df["method"] == REFERENCE, np.isclose(df["ratio"], 1.0), np.isclose(df["ratio"], ratio))
    keep = (df["model"] == model) & df["method"].isin(list(methods)) & df["benchmark"].isin(list(benchmarks))
    keep &= at_ratio
    if frames is not None:
        keep &= df["frames"] == frames
    if task is not None:
        if "task" not in df.columns:
            raise ValueError(f"the results frame lacks the task column needed to pick task={task!r}")
        keep &= df["task"] == task
    rows = df[keep]
    if "experiment" not in rows.columns:
        rows = rows.assign(experiment="")
    cells = one_row_per_cell(rows, ["method", "frames", "benchmark"])
    finished = (cells["status"] == OK) & np.isfinite(cells["value"].astype(float))
    return cells[finished | (cells["status"] == OOM)].reset_index(drop=True)


def _ordered_methods(present: Sequence[str]) -> list[str]:
    known = [m for m in METHOD_ORDER if m in present]
    return known + sorted(m for m in set(present) if m not in METHOD_ORDER)


def _no_data(figure_name: str, **asked: Any) -> ValueError:
    what = ", ".join(f"{key}={value!r}" for key, value in asked.items())
    return ValueError(f"{figure_name}: no results for {what}")


def _pct(ratio: float) -> str:
    return f"{ratio * 100:g}%"


def _figure_legend(figure: Figure, axes: Sequence[Axes], columns: int) -> None:
    """One legend for the whole figure, entries in first-seen order, below the panels."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        figure.legend(list(handles.values()), list(handles), loc="outside lower center",
                      ncol=min(columns, len(handles)), frameon=False)


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
    cells = _cells(df, model=model, methods=wanted, ratio=ratio, benchmarks=benchmarks)
    if cells.empty:
        raise _no_data("frame_scaling", model=model, ratio=ratio, methods=wanted, benchmarks=list(benchmarks))
    lines = _ordered_methods([m for m in wanted if m in set(cells["method"])])
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
    figure.suptitle(f"{model_name(model)}, R = {_pct(ratio)}")
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
    cells = _cells(df, model=model, methods=methods, ratio=ratio, benchmarks=benchmarks, frames=frames)
    cells = cells[cells["status"] == OK]
    if cells.empty:
        raise _no_data("budget_gains", model=model, frames=frames, ratio=ratio, methods=methods,
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
    figure.suptitle(f"{model_name(model)}, {frames} frames, R = {_pct(ratio)}")
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
    cells = _cells(df, model=model, methods=methods, ratio=ratio, benchmarks=metrics, frames=frames, task=task)
    cells = cells[cells["status"] == OK]
    if cells.empty:
        raise _no_data("efficiency_bars", model=model, frames=frames, ratio=ratio, task=task, methods=list(methods),
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
    figure.suptitle(f"{model_name(model)} on {task}, {frames} frames, R = {_pct(ratio)}")
    return figure


def plot_efficiency_bars(df: pd.DataFrame, out_stem: PathLike, *, model: str = "llava_ov_7b", frames: int = 32,
                         ratio: float = 0.25, task: str = "videomme",
                         methods: Sequence[str] = ("vanilla", "fastvid", "vidcom2", "vcast"),
                         metrics: Sequence[str] = ("PrefillLatency_s", "TotalLatency_s", "PeakMemory_MB"),
                         ) -> list[Path]:
    """fig:llava_ov_efficiency as PNG and PDF (see :func:`build_efficiency_bars`)."""
    return save_figure(build_efficiency_bars(df, model=model, frames=frames, ratio=ratio, task=task,
                                             methods=methods, metrics=metrics), out_stem)


# ---------------------------------------------------------------------------------------------
# fig:temporal_allocation
# ---------------------------------------------------------------------------------------------

Profiles = Mapping[str, np.ndarray]


def _panels(profiles: Union[Profiles, Sequence[tuple[str, Profiles]]]) -> list[tuple[str, Profiles]]:
    panels = [("", profiles)] if isinstance(profiles, Mapping) else list(profiles)
    if not panels or any(not panel for _, panel in panels):
        raise ValueError("budget profiles: nothing to plot (no video, or a video with no allocation)")
    for title, panel in panels:
        lengths = {name: len(budgets) for name, budgets in panel.items()}
        if len(set(lengths.values())) != 1 or 0 in lengths.values():
            raise ValueError(f"budget profiles {title!r}: every allocation needs the same number (> 0) of frames, "
                             f"got {lengths}")
    return panels


def budget_profile_labels(frames_per_step: int) -> dict[str, str]:
    """Title, x and y label of the budget-profile figure, all naming the same unit: a frame, or a
    temporal patch of ``frames_per_step`` frames (Qwen3-VL)."""
    step = step_name(frames_per_step)
    if frames_per_step == 1:
        return {"title": "Token budget per frame", "x": "Frame index", "y": "Tokens kept per frame"}
    return {"title": f"Token budget per {step} ({frames_per_step} frames)",
            "x": f"{step.capitalize()} index ({frames_per_step} frames each)", "y": f"Tokens kept per {step}"}


def build_budget_profiles(profiles: Union[Profiles, Sequence[tuple[str, Profiles]]], *, ratio: float,
                          frames_per_step: int = 1, labels: Optional[Mapping[str, str]] = None) -> Figure:
    """Budget curves, one point per frame or temporal patch, one panel per video.

    Args:
        profiles: ``{allocation: int array [T]}`` for one video (see
            :func:`vcast.report.budget_profile.budget_profiles`), or a list of
            ``(title, profiles)`` for several.
        ratio: the retention ratio the budgets were computed at (for the title).
        frames_per_step: frames behind a point: 1 (a frame, LLaVA), or a temporal patch of
            several frames (Qwen3-VL: 2); the title and both axes say it.
        labels: legend label per curve key, over :data:`vcast.budget_profiles.ALLOCATION_LABELS`.
    """
    axis = budget_profile_labels(frames_per_step)
    panels = _panels(profiles)
    figure = Figure(figsize=(4.6 * len(panels), 3.2), layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, panel) in zip(axes, panels):
        for index, (name, budgets) in enumerate(panel.items()):
            budgets = np.asarray(budgets)
            is_vcast = name == "curvature"
            ax.plot(np.arange(len(budgets)), budgets,
                    color=ALLOCATION_COLORS.get(name, ANALYSIS_COLORS.get(name, f"C{index + 3}")),
                    label=(labels or {}).get(name, ALLOCATION_LABELS.get(name, name)), gid=f"profile:{name}",
                    marker="o",
                    markersize=3 if is_vcast else 2, linewidth=2.0 if is_vcast else 1.4, zorder=3 if is_vcast else 2)
        ax.set_xlabel(axis["x"])
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(axis["y"])
    figure.suptitle(f"{axis['title']}, R = {_pct(ratio)}")
    _figure_legend(figure, axes, columns=min(len(ALLOCATION_COLORS), max(len(panel) for _, panel in panels)))
    return figure


def plot_budget_profiles(profiles: Union[Profiles, Sequence[tuple[str, Profiles]]], out_stem: PathLike, *,
                         ratio: float, frames_per_step: int = 1,
                         labels: Optional[Mapping[str, str]] = None) -> list[Path]:
    """Budget profiles (fig:temporal_allocation, fig:budget_analysis) as PNG and PDF (see
    :func:`build_budget_profiles`)."""
    return save_figure(build_budget_profiles(profiles, ratio=ratio, frames_per_step=frames_per_step, labels=labels),
                       out_stem)


def artists_with_gid(figure: Figure, gid: str) -> list[Any]:
    """Lines and bars of ``figure`` whose gid is ``gid`` (all panels, in panel order)."""
    return [artist for ax in figure.axes for artist in [*ax.get_lines(), *ax.patches] if artist.get_gid() == gid]

