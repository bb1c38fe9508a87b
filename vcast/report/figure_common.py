"""What the report's figures share: the colours and method order, writing a figure as PNG and PDF
with the same bytes for the same figure, picking the cells a figure draws from the tidy frame, and
finding artists by ``gid``."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from vcast.atomic_files import atomic_write_bytes
from vcast.report.collect import one_row_per_cell
from vcast.report.layouts import REFERENCE
from vcast.report.scoring import CONFIG_DIR

logger = logging.getLogger("vcast.report.figures")  # the figures' log, as before this module was split off

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

def check_columns(df: pd.DataFrame) -> None:
    missing = [column for column in REQUIRED_COLUMNS if column not in df.columns]
    if missing:
        raise ValueError(f"the results frame lacks column(s) {missing}; it has {list(df.columns)}")


def figure_cells(df: pd.DataFrame, *, model: str, methods: Sequence[str], ratio: float, benchmarks: Sequence[str],
           frames: Optional[int] = None, task: Optional[str] = None) -> pd.DataFrame:
    """One row per (method, frames, benchmark): vanilla at ratio 1, the others at ``ratio``.

    The same cell can appear in several experiments (grids overlap): the rule of
    :func:`vcast.report.collect.one_row_per_cell` picks one. Failed cells are dropped.
    """
    check_columns(df)
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


def ordered_methods(present: Sequence[str]) -> list[str]:
    known = [m for m in METHOD_ORDER if m in present]
    return known + sorted(m for m in set(present) if m not in METHOD_ORDER)


def no_data(figure_name: str, **asked: Any) -> ValueError:
    what = ", ".join(f"{key}={value!r}" for key, value in asked.items())
    return ValueError(f"{figure_name}: no results for {what}")


def pct(ratio: float) -> str:
    return f"{ratio * 100:g}%"


def figure_legend(figure: Figure, axes: Sequence[Axes], columns: int) -> None:
    """One legend for the whole figure, entries in first-seen order, below the panels."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        figure.legend(list(handles.values()), list(handles), loc="outside lower center",
                      ncol=min(columns, len(handles)), frameon=False)


def artists_with_gid(figure: Figure, gid: str) -> list[Any]:
    """Lines and bars of ``figure`` whose gid is ``gid`` (all panels, in panel order)."""
    return [artist for ax in figure.axes for artist in [*ax.get_lines(), *ax.patches] if artist.get_gid() == gid]

