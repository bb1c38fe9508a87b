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

from vcast.report.figure_common import ALLOCATION_COLORS, save_figure
from vcast.report.layouts import PAPER_BASELINES, REFERENCE
from vcast.report.names import method_name, model_name
from vcast.report.products import TRADEOFF_FIGURE, TRADEOFF_PANELS
from vcast.report.tradeoff_points import (MEMORY, METRIC_LABELS, METRICS, PREFILL,  # noqa: F401 (METRICS: re-exported)
                                          SHORT_LABELS, accuracy_benchmarks, drawn_metrics, memory_note,
                                          tradeoff_points)
from vcast.report.tradeoff_spots import (BADGE_SIZE, EDGE, SPREAD_MAX, axis_range, coinciding, spot_lines,
                                         spread_offsets, x_limits)

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "p", "d")  # no star: that is vanilla's
VCAST = "vcast"
ACCURACY_RANGE = (0.0, 100.0)  # y is a percentage: the axis never leaves it
MIN_ACCURACY_SPAN = 4.0  # points: the y axis never zooms in closer than this
MAX_CURVES = 10  # methods one plot draws legibly; past it, the paper's comparison and a panel per method
PANELS_SUFFIX = TRADEOFF_PANELS.removeprefix(TRADEOFF_FIGURE)  # <out_stem><PANELS_SUFFIX>: a panel per method


def drawn_methods(points: pd.DataFrame) -> list[str]:
    """The methods of ``points`` but vanilla, in legend order: V-CAST first, then by display name."""
    return sorted((m for m in points["method"].unique() if m != REFERENCE),
                  key=lambda m: (m != VCAST, method_name(m).lower()))


def method_styles(methods: Sequence[str]) -> dict[str, dict]:
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
    xlim = x_limits(drawn[metric].to_numpy(float), metric)
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


def build_tradeoff(points: pd.DataFrame, *, model: str, y_label: str = "Accuracy (%)", note: str = "") -> Figure:
    """The figure of :func:`tradeoff_points` (see the module docstring); ``note``: a line under the
    title (which methods it shows)."""
    if points.empty:
        raise ValueError(f"trade-off: nothing to draw for model {model!r}")
    metrics = drawn_metrics(points)
    if not metrics:
        raise ValueError(f"trade-off: no cell of model {model!r} recorded kept tokens, latency or memory")
    frame_counts = sorted(points["frames"].unique(), reverse=True)
    methods = drawn_methods(points)
    styles = method_styles(methods)
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
    if note:
        title += f"\n{note}"
    memory = memory_note(points)
    if memory:  # in the figure; the log said it once already, with the points (tradeoff_points)
        title += f"\n{memory}"
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


def tradeoff_figures(frame: pd.DataFrame, out_stem: PathLike, *, model: str,
                     experiments: Optional[Sequence[str]] = None,
                     benchmarks: Optional[Sequence[str]] = None) -> list[tuple[Figure, Path]]:
    """The trade-off figures of ``frame``'s cells of ``model`` and the stem each is written to: the
    figure (``out_stem``) and, past :data:`MAX_CURVES` methods, every method one panel each
    (``<out_stem>-methods``: :data:`PANELS_SUFFIX`, :mod:`vcast.report.tradeoff_methods`), the
    figure then drawing vanilla, V-CAST and the paper's baselines (every method where fewer than
    two of those are there)."""
    from vcast.report.tradeoff_methods import build_method_panels

    points = tradeoff_points(frame, model=model, experiments=experiments, benchmarks=benchmarks)
    used = list(benchmarks) if benchmarks else accuracy_benchmarks(
        frame[(frame["model"] == model) & (frame["status"] == "ok")])
    y_label = f"{used[0]} accuracy (%)" if len(used) == 1 else f"Average of {len(used)} benchmarks (%)"
    methods = drawn_methods(points)
    if len(methods) <= MAX_CURVES:
        return [(build_tradeoff(points, model=model, y_label=y_label), Path(out_stem))]
    panels = Path(f"{out_stem}{PANELS_SUFFIX}")
    paper = [m for m in methods if m in (VCAST, *PAPER_BASELINES)]
    shown, note = points, f"every method, one panel each: {panels.name}"
    if len(paper) >= 2:  # the paper's comparison, its front among these methods
        shown = tradeoff_points(frame[frame["method"].isin([REFERENCE, *paper])], model=model,
                                experiments=experiments, benchmarks=benchmarks)
        note = f"vanilla, V-CAST and the paper's baselines; all {len(methods)} methods, one panel each: {panels.name}"
    return [(build_tradeoff(shown, model=model, y_label=y_label, note=note), Path(out_stem)),
            (build_method_panels(points, methods, method_styles(methods), model=model, y_label=y_label,
                                 min_span=MIN_ACCURACY_SPAN), panels)]


def plot_tradeoff(frame: pd.DataFrame, out_stem: PathLike, *, model: str,
                  experiments: Optional[Sequence[str]] = None,
                  benchmarks: Optional[Sequence[str]] = None) -> list[Path]:
    """Each of :func:`tradeoff_figures` as ``<stem>.png`` and ``.pdf``; returns their paths."""
    written: list[Path] = []
    for figure, stem in tradeoff_figures(frame, out_stem, model=model, experiments=experiments,
                                         benchmarks=benchmarks):
        written += save_figure(figure, stem)
    return written
