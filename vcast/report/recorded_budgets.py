"""Budget profiles from what the cells recorded: the tokens each method kept per frame (or per
temporal patch of 2 frames, Qwen3-VL) on the same items, read from the cells' kept-token records
(:mod:`vcast.kept_records`). The figures show what the evaluated cells did, at their own frames
and resolution; nothing is decoded or run again.

* ``budget-profiles`` (fig:temporal_allocation): V-CAST's temporal allocations, Uniform
  (``vcast_uniform``), Global Uniqueness (``vcast_uniqueness``) and Curvature-Aware (``vcast``).
* ``budget-analysis`` (fig:budget_analysis): how the compared methods spread their budget, Uniform
  (VisionZip), segment-based (FastVID, HoliTom), global uniqueness (VidCom²) and curvature-aware
  (V-CAST).

A method whose cell is missing, unfinished or has no records is left out of the panels and named
in the log; fewer than two methods with records is an error that says which cells to run.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from vcast.budget_profiles import panel_title
from vcast.kept_records import KeptRecord
from vcast.results.tree import Cell
from vcast.report.collect import usual_frames

logger = logging.getLogger(__name__)

# Figure -> (curve key, cell method) in legend order; keys with a colour of their own in
# vcast.report.figure_common.ALLOCATION_COLORS keep it.
FIGURE_METHODS: dict[str, tuple[tuple[str, str], ...]] = {
    "budget-profiles": (("uniform", "vcast_uniform"), ("uniqueness", "vcast_uniqueness"), ("curvature", "vcast")),
    "budget-analysis": (("visionzip", "visionzip"), ("fastvid", "fastvid"), ("holitom", "holitom"),
                        ("vidcom2", "vidcom2"), ("curvature", "vcast")),
}
CURVE_LABELS: dict[str, str] = {
    "visionzip": "Uniform (VisionZip)",
    "fastvid": "Segment-based (FastVID)",
    "holitom": "Segment-based (HoliTom)",
    "vidcom2": "Global uniqueness (VidCom²)",
}
DEFAULT_ITEMS = 3

Panels = list[tuple[str, dict[str, np.ndarray]]]


def recorded_panels(frame: pd.DataFrame, results: Path, figure: str, *, ratio: float,
                    experiments: Sequence[str] = (), model: Optional[str] = None, frames: Optional[int] = None,
                    items: int = DEFAULT_ITEMS, seed: int = 0) -> tuple[Panels, int]:
    """``(panels, frames per step)`` of ``figure``: up to ``items`` items, chosen with ``seed`` among
    those every drawn method recorded, one panel each, ``{curve key: budgets [T]}``.

    Args:
        frame: the report's tidy frame (:func:`vcast.report.collect.collect`), one profile.
        results: the results root its ``cell`` paths are relative to.
        figure: a key of :data:`FIGURE_METHODS`.
        ratio: the cells' retention ratio.
        experiments: the experiments whose cells count (all when empty).
        model: the model config whose cells count (all when None).
        frames: the cells' frame count (None: the count most finished cells share, the fewest on ties).
    Raises:
        ValueError: fewer than two methods have records for a common item; the message names the cells.
    """
    wanted = FIGURE_METHODS[figure]
    rows = frame[(frame["status"] == "ok") & np.isclose(frame["ratio"].astype(float), ratio)
                 & frame["method"].isin([method for _, method in wanted])]
    if experiments:
        rows = rows[rows["experiment"].isin(list(experiments))]
    if model is not None:
        rows = rows[rows["model"] == model]
    if rows.empty:
        raise ValueError(f"no finished cell of {', '.join(m for _, m in wanted)} at r = {ratio:g}"
                         f"{' in ' + ', '.join(experiments) if experiments else ''}")
    if frames is None:
        frames = usual_frames(rows.drop_duplicates("cell")["frames"])
    rows = rows[rows["frames"].astype(int) == frames]
    records: dict[str, dict[tuple[str, int, int], KeptRecord]] = {}
    for key, method in wanted:
        cells = sorted(set(rows.loc[rows["method"] == method, "cell"]))
        found: dict[tuple[str, int, int], KeptRecord] = {}
        for cell in cells:
            found.update(Cell(Path(results) / cell).kept())
        if found:
            records[key] = found
        else:
            logger.info("%s: no kept-token records for %s at r = %g, %d frames (%s); left out", figure, method,
                        ratio, frames, ", ".join(cells) or "no finished cell")
    common = sorted(set.intersection(*(set(found) for found in records.values()))) if records else []
    if len(records) < 2 or not common:
        have = ", ".join(records) or "none"
        raise ValueError(f"{figure} needs kept-token records of at least two of "
                         f"{', '.join(m for _, m in wanted)} on the same items (r = {ratio:g}, {frames} frames); "
                         f"cells with records: {have}. Run the missing cells (records are on by default, "
                         "model arg record_kept)")
    chosen = sorted(random.Random(seed).sample(common, min(items, len(common))))
    panels: Panels = []
    steps = set()
    for item in chosen:
        first = next(iter(records.values()))[item]
        t, h, w = first.geometry.grid
        steps.add(first.geometry.frames_per_step)
        title = panel_title(f"{item[0]} #{item[1]}" + (f" video {item[2]}" if item[2] else ""), t, h * w,
                            first.geometry.frames_per_step)
        panels.append((title, {key: np.asarray(found[item].budgets, dtype=int) for key, found in records.items()}))
    if len(steps) != 1:
        raise ValueError(f"{figure}: the chosen items' records disagree on frames per step ({sorted(steps)})")
    return panels, steps.pop()
