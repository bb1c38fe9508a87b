"""A results tree (the sweep's cells) as one tidy DataFrame.

One row per (cell, benchmark): ``experiment, model, frames, ratio, method, task, benchmark,
value, status, cell, profile, variant, limit, missing_videos, memory_source`` (``profile``: ``reproduce`` or
``clean``, the sweep's; ``variant``: the method's variant; cells from before variants read as
``reproduce`` / ``paper``; ``limit``: the ``limit`` of a partial (smoke) run, NaN for a full
one; ``missing_videos``: items whose video could not be read; ``memory_source``: what the peak
memory measured, cell.json's ``efficiency.memory_source`` (``cuda_max_allocated`` on a GPU,
``process_peak_rss`` on CPU), empty when not recorded). ``status`` is the cell's (``ok``,
``oom``, ``failed``); an OOM or failed cell still
yields one row per benchmark of its task, with ``value`` NaN, so tables can print ``OOM``. Efficiency figures of a finished cell are rows too (``PrefillLatency_s`` ...,
``SelectionLatency_s`` and ``SelectionPctPrefill``: the method's own selection time, and it in
percent of the prefill time).

Nothing here raises on a bad cell: unreadable or inconsistent files are logged, listed in
:attr:`Collection.problems` and skipped, so one broken cell never hides the others.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from vcast.report.scoring import CONFIG_DIR, MalformedCell, TaskScoring, benchmark_values, load_task_scorings
from vcast.report.shared_reasons import SharedReasons
from vcast.results.record import CellRecord
from vcast.results.tree import Cell, CellFileError, ResultsTree, first_per_doc

logger = logging.getLogger(__name__)

COLUMNS = ["experiment", "model", "frames", "ratio", "method", "task", "benchmark", "value", "status", "cell",
           "profile", "variant", "limit", "missing_videos", "memory_source"]
KEY = ["experiment", "model", "frames", "ratio", "method"]
# The record's efficiency field -> the paper's efficiency column.
EFFICIENCY_COLUMNS = {
    "prefill_latency_s": "PrefillLatency_s",
    "selection_latency_s": "SelectionLatency_s",  # the method's own work: finding, scoring, re-laying tokens
    "generation_latency_s": "GenerationLatency_s",
    "prepare_latency_s": "PrepareLatency_s",  # the harness's video reading + preprocessing (vcast.eval.prefetch)
    "total_latency_s": "TotalLatency_s",
    "peak_memory_mb": "PeakMemory_MB",
    "throughput_items_per_s": "Throughput_items_per_s",
    # Theoretical prefill TFLOPs per item, vision encoder + LLM (vcast.models.flops; not in the paper).
    "prefill_tflops_per_item": "PrefillTFLOPs",
}
# Budget honesty: tokens the method really kept (the record's efficiency), shown with --kept-tokens.
KEPT_TOKENS, KEPT_PERCENT = "KeptTokens", "KeptPct"
# In-LLM methods drop tokens between layers too: the share each layer sees, averaged over layers.
LAYER_PERCENT = "LayerAvgPct"
# Selection time over the prefill it precedes (a separate meter, so the share may exceed 100).
SELECTION_SHARE = "SelectionPctPrefill"
SIDE_COLUMNS = (*EFFICIENCY_COLUMNS.values(), SELECTION_SHARE, KEPT_TOKENS, KEPT_PERCENT, LAYER_PERCENT)  # not benchmarks
FAILED_STATUSES = ("oom", "failed")


@dataclass
class Collection:
    """The tidy frame and what could not be read (one line per skipped cell)."""

    frame: pd.DataFrame
    problems: list[str] = field(default_factory=list)


def _cell_rows(cell: Cell, record: CellRecord, scoring: TaskScoring) -> list[dict[str, Any]]:
    spec = record.spec
    efficiency = record.efficiency
    base = {
        "experiment": spec.experiment, "model": spec.model, "frames": int(spec.frames),
        "ratio": float(spec.ratio), "method": spec.method, "task": spec.task,
        "cell": cell.rel, "profile": spec.profile, "variant": spec.variant,
        "limit": math.nan if spec.limit is None else float(spec.limit),
        "missing_videos": int(record.missing_visuals.count),
        "memory_source": str((efficiency.memory_source if efficiency is not None else None) or ""),
    }
    if record.status in FAILED_STATUSES:
        return [{**base, "benchmark": name, "value": math.nan, "status": record.status} for name in scoring.benchmarks]
    if record.status != "ok":
        raise MalformedCell(f"status {record.status!r} (expected ok, oom or failed)")
    reason = cell.why_incomplete()
    if reason:
        raise MalformedCell(f"status ok but {reason} (a cell copied mid-write?)")
    results = cell.results()
    samples = None
    if scoring.breakdown is not None:
        by_task = cell.samples()
        samples = first_per_doc([row for rows in by_task.values() for row in rows]) if by_task else None
    values = benchmark_values(scoring, results, samples, where=base["cell"])
    bad = sorted(name for name, value in values.items() if not math.isfinite(float(value)))
    if bad:
        raise MalformedCell(f"non-finite score(s) for {', '.join(bad)} in {Path(str(record.results_file)).name}")
    rows = [{**base, "benchmark": name, "value": float(value), "status": "ok"} for name, value in values.items()]
    figures = efficiency.figures() if efficiency is not None else {}
    for key, column in EFFICIENCY_COLUMNS.items():
        value = figures.get(key)
        if isinstance(value, (int, float)):
            rows.append({**base, "benchmark": column, "value": float(value), "status": "ok"})
    if efficiency is None:
        return rows
    selection, prefill = efficiency.selection_latency_s, efficiency.prefill_latency_s
    if isinstance(selection, (int, float)) and isinstance(prefill, (int, float)) and prefill > 0:
        rows.append({**base, "benchmark": SELECTION_SHARE, "value": 100.0 * selection / prefill, "status": "ok"})
    kept, total = efficiency.mean_video_tokens_kept, efficiency.mean_video_tokens_total
    if isinstance(kept, (int, float)) and isinstance(total, (int, float)) and total > 0:
        rows.append({**base, "benchmark": KEPT_TOKENS, "value": float(kept), "status": "ok"})
        rows.append({**base, "benchmark": KEPT_PERCENT, "value": 100.0 * kept / total, "status": "ok"})
    if isinstance(efficiency.layer_retention, (int, float)):
        rows.append({**base, "benchmark": LAYER_PERCENT, "value": 100.0 * efficiency.layer_retention, "status": "ok"})
    return rows


def one_row_per_cell(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """``frame`` with one row per ``keys`` where experiments overlap (the same cell run twice).

    A finished row with a number wins, then an OOM row, then any other (failed); among equals the
    first experiment in sorted order. Two finished rows that disagree are logged.
    """
    finished = (frame["status"] == "ok") & np.isfinite(frame["value"].astype(float))
    rank = np.where(finished, 0, np.where(frame["status"] == "oom", 1, 2))
    ordered = frame.assign(_rank=rank).sort_values(["_rank", "experiment"], kind="stable")
    for key, group in ordered[ordered["_rank"] == 0].groupby(list(keys)):
        if group["value"].nunique() > 1:
            logger.warning("conflicting values for %s in experiments %s: %s; using the first", key,
                           group["experiment"].tolist(), group["value"].tolist())
    return ordered.drop_duplicates(list(keys), keep="first").drop(columns="_rank")


def usual_frames(frames: Iterable[Any]) -> int:
    """The frame count most of the given cells ran at (one value per cell), the fewest on ties:
    what a figure drawn from an experiment's cells shows when no count is asked for."""
    counts = Counter(int(f) for f in frames)
    if not counts:
        raise ValueError("no cells to take a frame count from")
    return min(counts, key=lambda f: (-counts[f], f))


def collect(root: Path, *, config_dir: Path = CONFIG_DIR,
            scorings: Optional[dict[str, TaskScoring]] = None,
            folders: Optional[Sequence[str]] = None) -> Collection:
    """Every cell under ``root`` (a results root or one experiment's folder) as a tidy frame;
    ``folders``: only the cells of these experiment folders of the results root ``root`` (a target's
    build reads its own, and says nothing of other experiments' cells)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no results folder {root}")
    scorings = scorings if scorings is not None else load_task_scorings(config_dir)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for cell in ResultsTree(root).cells():
        if folders is not None and Path(cell.rel).parts[0] not in folders:
            continue
        try:
            record = cell.record
            if record is None:
                continue  # removed since the tree was listed
            if record.spec.task not in scorings:
                raise MalformedCell(f"task {record.spec.task!r} has no config in {config_dir}/task")
            rows.extend(_cell_rows(cell, record, scorings[record.spec.task]))
        except (MalformedCell, CellFileError, OSError, TypeError, ValueError) as error:
            problems.append(f"{cell.rel}: {error}")
            logger.warning("skipping %s: %s", cell.rel, error)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame = frame.astype({"frames": "int64", "ratio": "float64", "value": "float64", "limit": "float64",
                          "missing_videos": "int64"})
    logger.info("read %d cell(s) under %s (%d skipped)", frame["cell"].nunique(), root, len(problems))
    # One line per reason (a smoke sweep's cells share their limit), not one per cell.
    cells = frame.drop_duplicates("cell").sort_values("cell")
    partial, unreadable = SharedReasons(), SharedReasons()
    for cell, limit in cells.loc[cells["limit"].notna(), ["cell", "limit"]].itertuples(index=False):
        partial.add(limit, cell)
    for cell, missing in cells.loc[cells["missing_videos"] > 0, ["cell", "missing_videos"]].itertuples(index=False):
        unreadable.add("", f"{cell} ({missing})")
    partial.log(logger, logging.WARNING, "{count} cell(s) are partial runs (limit {reason:g}): their numbers are "
                "marked, not a full result")
    unreadable.log(logger, logging.WARNING, "{count} cell(s) had items with no readable video (answered empty; "
                   "how many in brackets)")
    return Collection(frame=frame, problems=problems)
