"""The points the trade-off figure draws (:mod:`vcast.report.tradeoff`): per method, ratio and
frame count, the accuracy and each cost (kept share, layer-averaged share, prefill seconds, peak
memory), whether it is on a panel's Pareto front, and which peak memories say nothing (measured
on CPU). Tests check these, not pixels."""

from __future__ import annotations

import logging
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from vcast.report.collect import KEPT_PERCENT, LAYER_PERCENT, SIDE_COLUMNS, one_row_per_cell
from vcast.report.layouts import MAIN_AVERAGE, REFERENCE
from vcast.report.shared_reasons import SharedReasons

logger = logging.getLogger("vcast.report.tradeoff")  # the figure's own log, as before its data moved here

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
# The memory meter of a cell on a GPU (vcast.models.meters); anything else is CPU process memory.
CUDA_MEMORY = "cuda_max_allocated"


def accuracy_benchmarks(frame: pd.DataFrame) -> list[str]:
    """The benchmarks averaged into y: the paper's four when all are present, else every
    benchmark column that is not a per-group breakdown (``VideoMME-Short`` ...) or a cost."""
    present = set(frame["benchmark"])
    if set(MAIN_AVERAGE) <= present:
        return list(MAIN_AVERAGE)
    return sorted(b for b in present if b not in SIDE_COLUMNS and "-" not in b)


def pareto_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``[N]`` bool: not dominated (lower x and higher y are better). Equal points: the first wins."""
    order = sorted(range(len(x)), key=lambda i: (x[i], -y[i], i))
    front = np.zeros(len(x), dtype=bool)
    best = -np.inf
    for i in order:
        if y[i] > best:
            front[i] = True
            best = y[i]
    return front


def memory_sources(values: pd.DataFrame) -> set[str]:
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
                sources = memory_sources(values)
                point["memory_source"] = ",".join(sorted(sources))
                if measured_off_gpu(point["memory_source"]) and np.isfinite(point[MEMORY]):
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
                table.loc[finite.index, f"pareto_{metric}"] = pareto_front(finite[metric].to_numpy(float),
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


def measured_off_gpu(sources: str) -> bool:
    """Whether some of ``memory_source``'s comma-joined meters is not the GPU's."""
    return bool({s for s in sources.split(",") if s} - {CUDA_MEMORY})


def memory_note(points: pd.DataFrame) -> Optional[str]:
    """What the figure says about peak memory measured on CPU (None when every cell ran on a GPU
    or recorded no meter)."""
    if "memory_source" not in points.columns:
        return None
    cpu = points[points["memory_source"].fillna("").map(measured_off_gpu)]
    if cpu.empty:
        return None
    if MEMORY in drawn_metrics(points):
        return f"Peak memory: {len(cpu)} point(s) measured on CPU left out (process memory, not meaningful)"
    return "Peak memory not drawn: the cells ran on CPU (process memory, not meaningful)"


