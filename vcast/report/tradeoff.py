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
staircase through those points, each ringed and labelled with its method. Vanilla is a black
star with a dotted line at its accuracy; V-CAST's points are labelled with their retention ratio.

Reading aids: the y axis spans the data padded, at least :data:`MIN_ACCURACY_SPAN` points and
never outside 0–100 (tied accuracies read as a tie, not as a ±2 band around it). Points whose
markers would cover each other (within :data:`TOUCH` of the axes in x and in y) are told
apart: up to :data:`SPREAD_MAX` are spread on a small circle (half or a quarter of one at a
side or corner of the axes) around their spot, vanilla's star staying in the middle, thin
spokes leading back; more become one numbered badge. Either way the spot is numbered and a
list beside the plot names every point there. Peak memory measured on CPU (``memory_source``
not ``cuda_max_allocated``: the process's resident memory, not the GPU memory the paper
reports) says nothing about a method, so those points are left out of the memory panel (the
panel too when none is left) and the title says so.

:func:`tradeoff_points` is the data the figure draws (tests check it, not pixels); artists
carry gids ``curve:<method>:<metric>``, ``vanilla:<metric>``, ``pareto:<metric>``,
``spread:<method>:<metric>`` (a marker drawn off its spot), ``badge:<metric>``,
``ring:<method>:<metric>`` and ``pareto-label:<method>:<metric>`` (a front point's ring and
name), ``spot:<n>`` (a spot's number) and ``spots`` (the list).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import ScaledTranslation, Transform

from vcast.report.collect import KEPT_PERCENT, LAYER_PERCENT, SIDE_COLUMNS, one_row_per_cell
from vcast.report.figures import ALLOCATION_COLORS, save_figure
from vcast.report.layouts import MAIN_AVERAGE, REFERENCE
from vcast.report.names import method_name, model_name
from vcast.report.shared_reasons import SharedReasons

logger = logging.getLogger(__name__)

PREFILL, MEMORY = "PrefillLatency_s", "PeakMemory_MB"
METRICS = (KEPT_PERCENT, LAYER_PERCENT, PREFILL, MEMORY)
METRIC_LABELS = {
    KEPT_PERCENT: "Kept video tokens (%)",
    LAYER_PERCENT: "Layer-averaged retention (%)",
    PREFILL: "Prefill latency (s, summed over items)",
    MEMORY: "Peak memory (MB)",
}
SHORT_LABELS = {KEPT_PERCENT: "{:.3g}% kept", LAYER_PERCENT: "{:.3g}% layer-avg", PREFILL: "{:.3g} s prefill",
                MEMORY: "{:.0f} MB"}
# How a cost is combined over a point's tasks (one cell per benchmark task).
AGGREGATE = {KEPT_PERCENT: "mean", LAYER_PERCENT: "mean", PREFILL: "sum", MEMORY: "max"}
# LayerAvgPct is drawn only when some method's differs from its kept share by more than this (points).
LAYER_DIFFERS = 0.5
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "p", "d")  # no star: that is vanilla's
VCAST = "vcast"
# The memory meter of a cell on a GPU (vcast.models.meters); anything else is CPU process memory.
CUDA_MEMORY = "cuda_max_allocated"

ACCURACY_RANGE = (0.0, 100.0)  # y is a percentage: the axis never leaves it
MIN_ACCURACY_SPAN = 4.0  # points: the y axis never zooms in closer than this
AXIS_PAD = 0.08  # of the span, on each side of the data
PERCENT_XLIM = (0.0, 106.0)  # the kept and layer-averaged shares
TOUCH = 0.025  # axes fraction: closer than this in x and in y, two markers cover each other
EDGE = 0.12  # axes fraction: a spot this close to a side is spread away from it only
SPREAD_STEP_PT = 7.5  # points between neighbouring markers on a spread circle
SPREAD_MIN_RADIUS_PT = 6.5
ANCHORED_MIN_RADIUS_PT = 10.0  # around vanilla's (larger) star
NAMES_PER_LINE = 4  # in the list of spots beside the plot
SPREAD_MAX = 7  # a spot with more points gets one numbered badge instead (the list names them)
BADGE_SIZE = 14  # points

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


def _memory_sources(values: pd.DataFrame) -> set[str]:
    """The recorded memory meters of some cells (empty where none is recorded)."""
    if "memory_source" not in values.columns:
        return set()
    return {str(s) for s in values["memory_source"] if isinstance(s, str) and s}


def tradeoff_points(frame: pd.DataFrame, *, model: str, experiments: Optional[Sequence[str]] = None,
                    benchmarks: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """One row per (frames, method, ratio) with every benchmark of ``benchmarks`` finished.

    Columns: ``frames, method, ratio, accuracy, tasks`` (how many task cells), one column per
    cost of :data:`METRICS` (NaN where a cell lacks it), ``memory_source`` (the cells' memory
    meters, comma-joined; empty when not recorded) and ``pareto_<metric>`` (bool, among the
    points of the same frame count with that cost). Peak memory measured on CPU is NaN.
    """
    rows = frame[(frame["model"] == model) & (frame["status"] == "ok") & np.isfinite(frame["value"].astype(float))]
    if experiments:
        rows = rows[rows["experiment"].isin(list(experiments))]
    rows = one_row_per_cell(rows, ["frames", "ratio", "method", "task", "benchmark"])
    wanted = list(benchmarks) if benchmarks else accuracy_benchmarks(rows)
    if not wanted:
        raise ValueError(f"trade-off: no benchmark scores for model {model!r}")
    points = []
    # A grid of CPU cells shares one reason: said once, with the count and a few points.
    lacking, off_gpu = SharedReasons(), SharedReasons()
    for (frames, method, ratio), cell in rows.groupby(["frames", "method", "ratio"], sort=True):
        scores = cell[cell["benchmark"].isin(wanted)]
        where = f"{method} {frames:g}f r={ratio:g}"
        if set(scores["benchmark"]) != set(wanted):
            lacking.add(", ".join(sorted(set(wanted) - set(scores["benchmark"]))), where)
            continue
        tasks = sorted(scores["task"].unique())
        point = {"frames": int(frames), "method": method, "ratio": float(ratio),
                 "accuracy": float(scores.groupby("benchmark")["value"].first().mean()), "tasks": len(tasks)}
        for metric in METRICS:
            values = cell[(cell["benchmark"] == metric) & cell["task"].isin(tasks)]
            point[metric] = (float(values["value"].agg(AGGREGATE[metric])) if len(values) == len(tasks)
                             else np.nan)
            if metric == MEMORY:
                sources = _memory_sources(values)
                point["memory_source"] = ",".join(sorted(sources))
                if _off_gpu(point["memory_source"]) and np.isfinite(point[MEMORY]):
                    off_gpu.add(point["memory_source"], where)
                    point[MEMORY] = np.nan
        points.append(point)
    lacking.log(logger, logging.INFO, "trade-off: {count} point(s) lack {reason}; not drawn")
    off_gpu.log(logger, logging.INFO, "trade-off: peak memory of {count} point(s) is {reason} (process memory of CPU "
                "runs, not GPU memory); not drawn")
    table = pd.DataFrame(points, columns=["frames", "method", "ratio", "accuracy", "tasks", *METRICS, "memory_source"])
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


def _off_gpu(sources: str) -> bool:
    """Whether some of ``memory_source``'s comma-joined meters is not the GPU's."""
    return bool({s for s in sources.split(",") if s} - {CUDA_MEMORY})


def memory_note(points: pd.DataFrame) -> Optional[str]:
    """What the figure says about peak memory measured on CPU (None when every cell ran on a GPU
    or recorded no meter)."""
    if "memory_source" not in points.columns:
        return None
    cpu = points[points["memory_source"].fillna("").map(_off_gpu)]
    if cpu.empty:
        return None
    if MEMORY in drawn_metrics(points):
        return f"Peak memory: {len(cpu)} point(s) measured on CPU left out (process memory, not meaningful)"
    return "Peak memory not drawn: the cells ran on CPU (process memory, not meaningful)"


def axis_range(values: Sequence[float], *, min_span: float, pad: float = AXIS_PAD,
               bounds: tuple[float, float] = (-math.inf, math.inf)) -> tuple[float, float]:
    """Limits around ``values``: their span (at least ``min_span``, centred on them) widened by
    ``pad`` of it on each side, then moved (and if need be cut) into ``bounds``."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        raise ValueError("axis_range: no finite value")
    low, high = float(finite.min()), float(finite.max())
    if high - low < min_span:
        middle = (low + high) / 2
        low, high = middle - min_span / 2, middle + min_span / 2
    margin = pad * (high - low)
    low, high = low - margin, high + margin
    if low < bounds[0]:
        low, high = bounds[0], min(bounds[1], high + bounds[0] - low)
    if high > bounds[1]:
        low, high = max(bounds[0], low - (high - bounds[1])), bounds[1]
    return float(low), float(high)


def coinciding(x: Sequence[float], y: Sequence[float], xlim: tuple[float, float], ylim: tuple[float, float],
               touch: float = TOUCH, order: Optional[Sequence[int]] = None) -> list[list[int]]:
    """Groups (two or more indices) of points whose markers cover each other. A group starts at
    the first point of ``order`` (default: by x, then y) not in one yet, its anchor, and takes
    every other such point within ``touch`` of the axes' width in x and of its height in y of it."""
    u = (np.asarray(x, dtype=float) - xlim[0]) / (xlim[1] - xlim[0])
    v = (np.asarray(y, dtype=float) - ylim[0]) / (ylim[1] - ylim[0])
    order = list(order) if order is not None else sorted(range(len(u)), key=lambda i: (u[i], v[i], i))
    grouped: set[int] = set()
    groups = []
    for anchor in order:
        if anchor in grouped:
            continue
        group = [anchor] + [i for i in order if i != anchor and i not in grouped
                            and abs(u[i] - u[anchor]) <= touch and abs(v[i] - v[anchor]) <= touch]
        grouped.update(group)
        if len(group) > 1:
            groups.append(group)
    return groups


def spread_offsets(count: int, *, anchored: bool = False,
                   toward: tuple[int, int] = (0, 0)) -> list[tuple[float, float]]:
    """Offsets (points) that set ``count`` markers of one spot apart, :data:`SPREAD_STEP_PT` from
    each other: evenly on a circle around it (clockwise from the upper left), or, for a spot at a
    side of the axes, on the half (at a corner the quarter) of it facing ``toward`` (x, y signs:
    ``(0, 1)`` upwards). ``anchored``: the first stays on the spot and the others go around it."""
    ring = count - 1 if anchored else count
    smallest = ANCHORED_MIN_RADIUS_PT if anchored else SPREAD_MIN_RADIUS_PT
    offsets = [(0.0, 0.0)] if anchored else []
    if toward == (0, 0):
        radius = max(smallest, ring * SPREAD_STEP_PT / (2 * math.pi))
        angles = [135.0 - 360.0 * k / ring for k in range(ring)]
    else:
        span = 180.0 if 0 in toward else 90.0
        middle = math.degrees(math.atan2(toward[1], toward[0]))
        radius = max(smallest, ring * SPREAD_STEP_PT / math.radians(span))
        angles = [middle + span / 2 - span * (k + 0.5) / ring for k in range(ring)]
    offsets.extend((radius * math.cos(math.radians(a)), radius * math.sin(math.radians(a))) for a in angles)
    return offsets


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


def _shifted(ax: Axes, offset: tuple[float, float]) -> Transform:
    """Data coordinates moved by ``offset`` points on the page."""
    if offset == (0.0, 0.0):
        return ax.transData
    return ax.transData + ScaledTranslation(offset[0] / 72, offset[1] / 72, ax.figure.dpi_scale_trans)


def _point_name(row: pd.Series, with_ratio: bool) -> str:
    name = method_name(row["method"])
    return f"{name} {row['ratio'] * 100:g}%" if with_ratio and row["method"] != REFERENCE else name


@dataclass
class _Spot:
    """Points of one panel drawn at one spot, the ``anchor``'s: ``offsets`` (points from it) where
    each marker goes when they are spread, or ``badge``, where the one numbered badge standing for
    them all goes."""

    anchor: int
    members: list[int]
    offsets: dict[int, tuple[float, float]]
    badge: Optional[tuple[float, float]]
    toward: tuple[int, int]


def _x_limits(values: Sequence[float], metric: str) -> tuple[float, float]:
    if metric in (KEPT_PERCENT, LAYER_PERCENT):
        return PERCENT_XLIM
    largest = float(np.nanmax(np.abs(np.asarray(values, dtype=float))))
    return axis_range(values, min_span=max(0.1 * largest, 1e-6), pad=0.06, bounds=(0.0, math.inf))


def _groups(drawn: pd.DataFrame, metric: str, xlim: tuple[float, float], ylim: tuple[float, float],
            methods: Sequence[str]) -> list[_Spot]:
    """The panel's points whose markers would cover each other, grouped around an anchor (vanilla
    when it is one of them; members: row labels of ``drawn``, vanilla first, then in legend order
    and by ratio), each spread or badged."""
    rank = {method: index for index, method in enumerate([REFERENCE, *methods])}
    labels = list(drawn.index)
    x, y = drawn[metric].to_numpy(float), drawn["accuracy"].to_numpy(float)
    order = sorted(range(len(labels)), key=lambda i: (drawn.at[labels[i], "method"] != REFERENCE, x[i], y[i], i))
    groups = []
    for group in coinciding(x, y, xlim, ylim, order=order):
        anchor = labels[group[0]]
        members = sorted((labels[i] for i in group),
                         key=lambda label: (rank[drawn.at[label, "method"]], drawn.at[label, "ratio"]))
        anchored = drawn.at[anchor, "method"] == REFERENCE
        u = (drawn.at[anchor, metric] - xlim[0]) / (xlim[1] - xlim[0])
        v = (drawn.at[anchor, "accuracy"] - ylim[0]) / (ylim[1] - ylim[0])
        toward = (int(u < EDGE) - int(u > 1 - EDGE), int(v < EDGE) - int(v > 1 - EDGE))
        if len(members) <= SPREAD_MAX:
            offsets = dict(zip(members, spread_offsets(len(members), anchored=anchored, toward=toward)))
            groups.append(_Spot(anchor, members, offsets, None, toward))
        else:  # too many to spread near their spot: one badge (off a side or vanilla's star), the list names them
            badge = (spread_offsets(2, anchored=True, toward=toward)[1] if anchored or toward != (0, 0)
                     else (0.0, 0.0))
            groups.append(_Spot(anchor, members, {}, badge, toward))
    return groups


def _register(spots: list[dict], drawn: pd.DataFrame, group: _Spot, metric: str, prefix: str) -> int:
    """The number of ``group``'s spot (the same points at the same accuracy in another panel of the
    row keep theirs); records where it is for the list beside the plot."""
    anchor = drawn.loc[group.anchor]
    key = (prefix, round(float(anchor["accuracy"]), 6),
           tuple((drawn.at[label, "method"], drawn.at[label, "ratio"]) for label in group.members))
    spot = next((spot for spot in spots if spot["key"] == key), None)
    if spot is None:
        with_ratio = drawn.loc[group.members, "ratio"].nunique() > 1
        spot = {"key": key, "number": len(spots) + 1, "where": [], "accuracy": float(anchor["accuracy"]),
                "names": [_point_name(drawn.loc[label], with_ratio) for label in group.members], "prefix": prefix}
        spots.append(spot)
    spot["where"].append(SHORT_LABELS[metric].format(anchor[metric]))
    return spot["number"]


def _spoke(ax: Axes, xy: tuple[float, float], to: tuple[float, float], offset: tuple[float, float]) -> None:
    """A thin line from a point to where its marker is drawn: ``offset`` points off ``to``."""
    ax.annotate("", xy=xy, xytext=to, textcoords=_shifted(ax, offset), zorder=2,
                arrowprops={"arrowstyle": "-", "color": "0.6", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 0})


def _draw_panel(ax: Axes, at: pd.DataFrame, metric: str, methods: Sequence[str], styles: dict[str, dict],
                ylim: tuple[float, float], spots: list[dict], prefix: str) -> None:
    """One panel: curves, vanilla, the Pareto front (ringed and named), coinciding points spread
    or badged and numbered; ``spots`` collects the numbered spots."""
    drawn = at[np.isfinite(at[metric].astype(float))]
    vanilla = at[at["method"] == REFERENCE]
    if not vanilla.empty:
        ax.axhline(float(vanilla["accuracy"].iloc[0]), color="0.3", linestyle=":", linewidth=1.0, zorder=1)
    ax.set_ylim(*ylim)
    ax.set_xlabel(METRIC_LABELS[metric])
    ax.grid(alpha=0.3)
    if drawn.empty:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
        return
    xlim = _x_limits(drawn[metric].to_numpy(float), metric)
    ax.set_xlim(*xlim)
    groups = _groups(drawn, metric, xlim, ylim, methods)

    def xy_of(label: int) -> tuple[float, float]:
        return float(drawn.at[label, metric]), float(drawn.at[label, "accuracy"])

    # Row label -> (the spot, points off it) where its marker (or its group's badge) is drawn.
    moved: dict[int, tuple[tuple[float, float], tuple[float, float]]] = {}
    badged: set[int] = set()
    for group in groups:
        spot = xy_of(group.anchor)
        moved.update((label, (spot, offset)) for label, offset in group.offsets.items())
        if group.badge is not None:
            moved.update((label, (spot, group.badge)) for label in group.members)
            badged.update(group.members)

    front = drawn[drawn[f"pareto_{metric}"]].sort_values(metric)
    if len(front):
        ax.step(front[metric], front["accuracy"], where="post", color="0.55", linewidth=4.0, alpha=0.35,
                zorder=2, gid=f"pareto:{metric}", solid_capstyle="round")
    for method in methods:
        curve = drawn[drawn["method"] == method].sort_values("ratio")
        if curve.empty:
            continue
        style = styles[method]
        size = 6 if method == VCAST else 5
        in_place = [i for i, label in enumerate(curve.index) if label not in moved]
        ax.plot(curve[metric], curve["accuracy"], color=style["color"], marker=style["marker"] if in_place else "None",
                markevery=in_place if len(in_place) < len(curve) else None, markersize=size,
                linewidth=style["linewidth"], zorder=style["zorder"], label=method_name(method),
                gid=f"curve:{method}:{metric}")
        for label, row in curve.iterrows():
            if label in moved and label not in badged:
                spot, offset = moved[label]
                _spoke(ax, xy_of(label), spot, offset)
                ax.plot([spot[0]], [spot[1]], linestyle="none", marker=style["marker"], markersize=size,
                        color=style["color"], transform=_shifted(ax, offset), clip_on=False,
                        zorder=style["zorder"] + 0.5, gid=f"spread:{method}:{metric}")
            if method == VCAST and label not in moved and not row[f"pareto_{metric}"]:  # V-CAST's ratios
                ax.annotate(f"{row['ratio'] * 100:g}%", xy=xy_of(label), xytext=(5, -10), textcoords="offset points",
                            fontsize=7, color=style["color"])
    van = vanilla[np.isfinite(vanilla[metric].astype(float))]
    if not van.empty:
        ax.plot(van[metric], van["accuracy"], linestyle="none", marker="*", markersize=13, color="black",
                zorder=7, label=method_name(REFERENCE), gid=f"vanilla:{metric}", clip_on=False)
    for group in groups:
        spot = xy_of(group.anchor)
        number = _register(spots, drawn, group, metric, prefix)
        if group.badge is not None:
            for label in group.members:
                if label != group.anchor or group.badge != (0.0, 0.0):
                    _spoke(ax, xy_of(label), spot, group.badge)
            ax.plot([spot[0]], [spot[1]], linestyle="none", marker="o", markersize=BADGE_SIZE,
                    markerfacecolor="white", markeredgecolor="0.3", markeredgewidth=1.0,
                    transform=_shifted(ax, group.badge), clip_on=False, zorder=6.5, gid=f"badge:{metric}")
            ax.annotate(f"{number}", xy=spot, xytext=group.badge, textcoords="offset points", ha="center",
                        va="center", fontsize=7, fontweight="bold", color="0.2", zorder=6.6, gid=f"spot:{number}")
            continue
        # The number sits beyond the spread markers, on the side they went to (inside the axes).
        spread = list(group.offsets.values())
        middle = (sum(dx for dx, _ in spread), sum(dy for _, dy in spread))
        norm = math.hypot(*middle)
        inward = ((group.toward[0] / math.hypot(*group.toward), group.toward[1] / math.hypot(*group.toward))
                  if group.toward != (0, 0) else (0.0, -1.0))
        away = (middle[0] / norm, middle[1] / norm) if norm > 1e-6 else inward
        reach = max(math.hypot(*offset) for offset in spread) + 9
        ax.annotate(f"[{number}]", xy=spot, xytext=(away[0] * reach, away[1] * reach), textcoords="offset points",
                    ha="center", va="center", fontsize=7, color="0.3", gid=f"spot:{number}")
    for label, row in front.iterrows():
        spot, offset = moved.get(label, (xy_of(label), (0.0, 0.0)))
        ax.plot([spot[0]], [spot[1]], linestyle="none", marker="o",
                markersize=BADGE_SIZE + 5 if label in badged else 12, markerfacecolor="none", markeredgecolor="0.25",
                markeredgewidth=1.0, transform=_shifted(ax, offset), clip_on=False, zorder=6,
                gid=f"ring:{row['method']}:{metric}")
        if row["method"] == REFERENCE:
            continue
        norm = math.hypot(*offset)
        direction = (offset[0] / norm, offset[1] / norm) if norm else (0.6, 0.8)
        reach = (BADGE_SIZE + 5) / 2 + 4 if label in badged else 11
        ax.annotate(_point_name(row, True), xy=spot, textcoords="offset points",
                    xytext=(offset[0] + reach * direction[0], offset[1] + reach * direction[1]),
                    ha="left" if direction[0] >= 0 else "right", va="center", fontsize=7, color="0.15",
                    gid=f"pareto-label:{row['method']}:{metric}", zorder=8)


def spot_lines(spots: Sequence[dict]) -> list[str]:
    """The list beside the plot: per numbered spot, where it is and every point drawn around it."""
    lines = []
    for spot in spots:
        names = spot["names"]
        rows = [", ".join(names[i:i + NAMES_PER_LINE]) for i in range(0, len(names), NAMES_PER_LINE)]
        lines.append(f"[{spot['number']}] {spot['prefix']}{' / '.join(spot['where'])}, {spot['accuracy']:.1f}%:\n"
                     + ",\n".join(f"    {row}" for row in rows))
    return lines


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
    spots: list[dict] = []
    for row, frames in zip(grid, frame_counts):
        at = points[points["frames"] == frames]
        ylim = axis_range(at["accuracy"].to_numpy(float), min_span=MIN_ACCURACY_SPAN, bounds=ACCURACY_RANGE)
        prefix = f"{frames}f, " if len(frame_counts) > 1 else ""
        for ax, metric in zip(row, metrics):
            _draw_panel(ax, at, metric, methods, styles, ylim, spots, prefix)
        row[0].set_ylabel(f"{y_label}\n{frames} frames" if len(frame_counts) > 1 else y_label)
    title = (f"{model_name(model)}: accuracy vs cost\n(one curve per method over its retention ratios, "
             "V-CAST's labelled; ringed: Pareto front)")
    note = memory_note(points)
    if note:  # in the figure; the log said it once already, with the points (tradeoff_points)
        title += f"\n{note}"
    suptitle = figure.suptitle(title, fontsize=10)
    handles = [Line2D([], [], color=styles[m]["color"], marker=styles[m]["marker"], linewidth=styles[m]["linewidth"])
               for m in methods]
    labels = [method_name(m) for m in methods]
    if (points["method"] == REFERENCE).any():
        handles.insert(0, Line2D([], [], color="black", marker="*", markersize=11, linestyle=":"))
        labels.insert(0, method_name(REFERENCE))
    handles.append(Line2D([], [], color="0.55", linewidth=4.0, alpha=0.35, marker="o", markerfacecolor="none",
                          markeredgecolor="0.25", markersize=9))
    labels.append("Pareto front")
    methods_legend = figure.legend(handles, labels, loc="outside lower center", ncol=min(6, len(labels)),
                                   frameon=False, fontsize=8)
    if spots:
        entries = spot_lines(spots)
        listing = figure.legend([Line2D([], [], linestyle="none") for _ in entries], entries,
                                loc="outside right center", frameon=False, fontsize=7, handlelength=0,
                                handletextpad=0, alignment="left", title_fontsize=8,
                                title="Points at one spot\n(spread around it, or one badge)")
        listing.set_gid("spots")
        # Tall enough that the list, centred on the right, clears the title above and the legend below.
        figure.draw_without_rendering()
        list_h, title_h, legend_h = (artist.get_window_extent().height / figure.dpi
                                     for artist in (listing, suptitle, methods_legend))
        needed = list_h + 2 * max(title_h, legend_h) + 0.3
        width, height = figure.get_size_inches()
        figure.set_size_inches(width, max(height, needed))
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
