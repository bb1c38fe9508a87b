"""Where the trade-off figure puts points that would cover each other: the axis ranges, which
points coincide on the axes, the offsets that spread them around their spot, and the list that
names every point of a spot."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from vcast.report.collect import KEPT_PERCENT, LAYER_PERCENT

AXIS_PAD = 0.08  # of the span, on each side of the data
TOUCH = 0.025  # axes fraction: closer than this in x and in y, two markers cover each other
EDGE = 0.12  # axes fraction: a spot this close to a side is spread away from it only
SPREAD_STEP_PT = 7.5  # points between neighbouring markers on a spread circle
SPREAD_MIN_RADIUS_PT = 6.5
ANCHORED_MIN_RADIUS_PT = 10.0  # around vanilla's (larger) star
NAMES_PER_LINE = 4  # in the list of spots beside the plot
SPREAD_MAX = 7  # a spot with more points gets one numbered badge instead (the list names them)
BADGE_SIZE = 14  # points
PERCENT_XLIM = (0.0, 106.0)  # the kept and layer-averaged shares


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


def x_limits(values: Sequence[float], metric: str) -> tuple[float, float]:
    """A panel's x range: the percent scale for shares, else the values padded (never below 0)."""
    if metric in (KEPT_PERCENT, LAYER_PERCENT):
        return PERCENT_XLIM
    largest = float(np.nanmax(np.abs(np.asarray(values, dtype=float))))
    return axis_range(values, min_span=max(0.1 * largest, 1e-6), pad=0.06, bounds=(0.0, math.inf))


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


def spot_lines(spots: Sequence[dict]) -> list[str]:
    """The list beside the plot: per numbered spot, where it is and every point drawn around it."""
    lines = []
    for spot in spots:
        names = spot["names"]
        rows = [", ".join(names[i:i + NAMES_PER_LINE]) for i in range(0, len(names), NAMES_PER_LINE)]
        lines.append(f"[{spot['number']}] {spot['prefix']}{' / '.join(spot['where'])}, {spot['accuracy']:.1f}%:\n"
                     + ",\n".join(f"    {row}" for row in rows))
    return lines


