"""Per-sample analysis: each method cell against vanilla and against V-CAST, item by item.

For every finished method cell and every reference cell of the same profile, experiment,
model, frame count and task (vanilla at any ratio; V-CAST, method ``vcast``, at the method's
ratio), over the items present in both (matched by ``(lmms task, doc_id)``) and for each
benchmark column the task fills (Video-MME: overall and each duration group separately):

* ``loyalty``: percent of items whose parsed answer equals the reference's;
* ``right_to_wrong`` / ``wrong_to_right``: items the reference got right and the method wrong,
  and the other way round (the discordant pairs);
* ``score`` / ``reference_score``: each run's score on those items (the benchmark's own
  arithmetic: MVBench the mean of its subtasks, MLVU of its question types), ``difference`` =
  ``score - reference_score`` in points, ``ci_low`` / ``ci_high`` its paired bootstrap interval;
* ``p_mcnemar``: McNemar's exact two-sided p-value of the discordant pairs.

:func:`accuracy_intervals` gives each cell's own score interval (the ``±`` of ``--intervals``).
See :mod:`vcast.report.significance` for the resampling.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from vcast.report.per_sample import CellItems, benchmark_items, strata_codes
from vcast.report.scoring import TaskScoring
from vcast.report.significance import (DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED, accuracy_interval,
                                       mcnemar_exact, paired_difference_interval, stratified_accuracy)

logger = logging.getLogger(__name__)

VANILLA, VCAST = "vanilla", "vcast"
REFERENCES = (VANILLA, VCAST)
COMPARISON_COLUMNS = ["profile", "experiment", "model", "frames", "ratio", "method", "reference", "reference_ratio",
                      "task", "benchmark", "items", "score", "reference_score", "difference", "ci_low", "ci_high",
                      "loyalty", "right_to_wrong", "wrong_to_right", "p_mcnemar", "resamples", "seed", "level",
                      "cell", "reference_cell", "partial"]
INTERVAL_COLUMNS = ["profile", "experiment", "model", "frames", "ratio", "method", "task", "benchmark", "items",
                    "score", "ci_low", "ci_high", "resamples", "seed", "level", "cell"]


def _paired(method: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """The items present in both runs, in the reference's order (stratum-contiguous)."""
    return reference.merge(method, on=["lmms_task", "doc_id"], suffixes=("_ref", ""), how="inner", sort=False)


def compare_cells(method: CellItems, reference: CellItems, scoring: TaskScoring, *,
                  resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                  level: float = DEFAULT_LEVEL) -> list[dict]:
    """One row (:data:`COMPARISON_COLUMNS`) per benchmark column of ``scoring`` with matched items."""
    merged = _paired(method.items, reference.items)
    if merged.empty:
        logger.warning("%s and %s share no items; nothing to compare", method.cell, reference.cell)
        return []
    dropped = len(method.items) + len(reference.items) - 2 * len(merged)
    if dropped:
        logger.info("%s vs %s: %d item(s) present in only one run are left out", method.cell, reference.cell,
                    dropped)
    rows = []
    # Strata and groups are the items' own (equal in both runs); the reference's order keeps strata contiguous.
    merged["stratum"], merged["group"] = merged["stratum_ref"], merged["group_ref"]
    for benchmark, items in benchmark_items(merged, scoring).items():
        strata = strata_codes(items["stratum"].tolist())
        ours = items["correct"].to_numpy(dtype=bool)
        theirs = items["correct_ref"].to_numpy(dtype=bool)
        low, high = paired_difference_interval(theirs, ours, strata, resamples=resamples, seed=seed, level=level)
        right_to_wrong = int(np.sum(theirs & ~ours))
        wrong_to_right = int(np.sum(~theirs & ours))
        score, reference_score = stratified_accuracy(ours, strata), stratified_accuracy(theirs, strata)
        rows.append({
            "profile": method.profile, "experiment": method.experiment, "model": method.model,
            "frames": method.frames, "ratio": method.ratio, "method": method.method,
            "reference": reference.method, "reference_ratio": reference.ratio, "task": method.task,
            "benchmark": benchmark, "items": len(items), "score": score, "reference_score": reference_score,
            "difference": score - reference_score, "ci_low": low, "ci_high": high,
            "loyalty": 100.0 * float(np.mean(items["answer"].to_numpy() == items["answer_ref"].to_numpy())),
            "right_to_wrong": right_to_wrong, "wrong_to_right": wrong_to_right,
            "p_mcnemar": mcnemar_exact(right_to_wrong, wrong_to_right), "resamples": resamples, "seed": seed,
            "level": level, "cell": method.cell, "reference_cell": reference.cell,
            "partial": method.limit is not None or reference.limit is not None,
        })
    return rows


def _pick(cells: Sequence[CellItems], what: str) -> Optional[CellItems]:
    """The one cell of ``cells`` (the first by path when a grid ran it twice, e.g. two variants)."""
    if not cells:
        return None
    ordered = sorted(cells, key=lambda c: c.cell)
    if len(ordered) > 1:
        logger.warning("%d cells for %s (%s); comparing against %s", len(ordered), what,
                       ", ".join(c.cell for c in ordered), ordered[0].cell)
    return ordered[0]


def compare_all(cells: Iterable[CellItems], scorings: dict[str, TaskScoring], *,
                references: Sequence[str] = REFERENCES, resamples: int = DEFAULT_RESAMPLES,
                seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Every method cell against each reference of its group (see the module docstring)."""
    groups: dict[tuple, list[CellItems]] = defaultdict(list)
    for cell in cells:
        groups[cell.key].append(cell)
    rows: list[dict] = []
    for key in sorted(groups):
        members = groups[key]
        for reference_method in references:
            for method in sorted(members, key=lambda c: (c.ratio, c.method, c.cell)):
                if method.method in (VANILLA, reference_method):
                    continue
                candidates = [c for c in members if c.method == reference_method
                              and (reference_method == VANILLA or math.isclose(c.ratio, method.ratio))]
                reference = _pick(candidates, f"{reference_method} of {method.cell}")
                if reference is None:
                    continue
                rows += compare_cells(method, reference, scorings[method.task], resamples=resamples, seed=seed,
                                      level=level)
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def accuracy_intervals(cells: Iterable[CellItems], scorings: dict[str, TaskScoring], *,
                       resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                       level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Each cell's own score and its bootstrap interval, per benchmark column (:data:`INTERVAL_COLUMNS`)."""
    rows = []
    for cell in cells:
        for benchmark, items in benchmark_items(cell.items, scorings[cell.task]).items():
            strata = strata_codes(items["stratum"].tolist())
            correct = items["correct"].to_numpy(dtype=bool)
            low, high = accuracy_interval(correct, strata, resamples=resamples, seed=seed, level=level)
            rows.append({"profile": cell.profile, "experiment": cell.experiment, "model": cell.model,
                         "frames": cell.frames, "ratio": cell.ratio, "method": cell.method, "task": cell.task,
                         "benchmark": benchmark, "items": len(items), "score": stratified_accuracy(correct, strata),
                         "ci_low": low, "ci_high": high, "resamples": resamples, "seed": seed, "level": level,
                         "cell": cell.cell})
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)
