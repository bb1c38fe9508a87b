"""The trade-off of many methods as small multiples: one panel per method, its accuracy against
its kept share over its retention ratios, over the same axes as every other panel, with vanilla's
accuracy (dotted), V-CAST's curve (thin, red) and every other point (grey) behind it. Past
:data:`vcast.report.tradeoff.MAX_CURVES` methods, one panel each reads where one plot of them all
is curves on curves; :func:`vcast.report.tradeoff.plot_tradeoff` writes it beside the main figure
(``<stem>-methods.{png,pdf}``). Artists carry gids ``panel:<method>`` (the method's curve) and
``context:<method>`` (the grey points)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from vcast.report.collect import KEPT_PERCENT, usual_frames
from vcast.report.figure_common import ALLOCATION_COLORS
from vcast.report.layouts import REFERENCE
from vcast.report.names import method_name, model_name
from vcast.report.tradeoff_points import METRIC_LABELS, drawn_metrics
from vcast.report.tradeoff_spots import axis_range, x_limits

COLUMNS = 5  # panels a row
VCAST = "vcast"


def build_method_panels(points: pd.DataFrame, methods: Sequence[str], styles: dict[str, dict], *, model: str,
                        y_label: str, min_span: float) -> Figure:
    """One panel per method of ``methods`` (in that order; styles as the main figure's) from
    :func:`vcast.report.tradeoff_points.tradeoff_points`'s ``points``, at the frame count most
    points have, x the kept share where recorded (else the first cost drawn).

    Raises:
        ValueError: no method, or no cost to draw.
    """
    if not methods:
        raise ValueError(f"trade-off panels: no method of model {model!r} to draw")
    metrics = drawn_metrics(points)
    if not metrics:
        raise ValueError(f"trade-off panels: no cell of model {model!r} recorded kept tokens, latency or memory")
    metric = KEPT_PERCENT if KEPT_PERCENT in metrics else metrics[0]
    frames = usual_frames(points["frames"])
    at = points[(points["frames"] == frames) & np.isfinite(points[metric].astype(float))]
    ylim = axis_range(at["accuracy"].to_numpy(float), min_span=min_span, bounds=(0.0, 100.0))
    xlim = x_limits(at[metric].to_numpy(float), metric)
    columns = min(COLUMNS, len(methods))
    rows = math.ceil(len(methods) / columns)
    figure = Figure(figsize=(2.5 * columns + 0.4, 2.2 * rows + 0.9), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False, sharex=True, sharey=True)
    vanilla = at[at["method"] == REFERENCE]
    for index, ax in enumerate(axes.flat):
        if index >= len(methods):
            ax.axis("off")
            continue
        method = methods[index]
        others = at[(at["method"] != method) & (at["method"] != REFERENCE)]
        ax.scatter(others[metric], others["accuracy"], s=7, color="0.78", zorder=1, gid=f"context:{method}")
        if not vanilla.empty:
            ax.axhline(float(vanilla["accuracy"].iloc[0]), color="0.3", linestyle=":", linewidth=1.0, zorder=2)
        if method != VCAST:
            reference = at[at["method"] == VCAST].sort_values("ratio")
            ax.plot(reference[metric], reference["accuracy"], color=ALLOCATION_COLORS["curvature"], linewidth=1.0,
                    alpha=0.8, zorder=3)
        curve = at[at["method"] == method].sort_values("ratio")
        style = styles[method]
        ax.plot(curve[metric], curve["accuracy"], color=style["color"], marker=style["marker"], markersize=4,
                linewidth=2.0, zorder=4, gid=f"panel:{method}")
        ax.set_title(method_name(method), fontsize=9)
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in axes[-1]:
        ax.set_xlabel(METRIC_LABELS[metric], fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel(y_label, fontsize=8)
    figure.suptitle(f"{model_name(model)}: accuracy vs cost per method, {frames} frames (dotted: vanilla; red: "
                    "V-CAST; grey: the other methods)", fontsize=10)
    return figure
