"""From one cell's lmms-eval output to the paper's benchmark numbers.

What each task contributes is read from its sweep config (``configs/task/<name>.yaml``): the
column name (``benchmark``), the metric of each lmms-eval task (``metrics``, glob patterns
allowed: MVBench's 20 subtasks are averaged), its ``scale`` (``fraction`` becomes percent) and an
optional per-sample ``breakdown`` (Video-MME overall and Short/Medium/Long, which lmms-eval only
logs). One source of truth: the sweep and the report read the same files.
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

logger = logging.getLogger(__name__)

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
SCALES = {"percent": 1.0, "fraction": 100.0}
# The overall score from samples and lmms-eval's own aggregate may differ by float noise only.
OVERALL_TOLERANCE = 0.05


class MalformedCell(ValueError):
    """A cell's files exist but cannot be turned into scores (the message says which and why)."""


@dataclass(frozen=True)
class Breakdown:
    """Per-sample scores grouped by a field: ``samples[field][by]`` -> ``columns[...]``."""

    field: str
    by: str
    score: str
    columns: Mapping[str, str]


@dataclass(frozen=True)
class TaskScoring:
    """How the cells of one task config become benchmark values (all in percent)."""

    name: str
    benchmark: str
    metrics: Mapping[str, str]
    scale: str
    breakdown: Optional[Breakdown] = None
    lmms_tasks: tuple[str, ...] = field(default_factory=tuple)

    @property
    def benchmarks(self) -> list[str]:
        """Every column this task fills (the overall one first)."""
        return [self.benchmark, *(self.breakdown.columns.values() if self.breakdown else ())]


def load_task_scorings(config_dir: Path = CONFIG_DIR) -> dict[str, TaskScoring]:
    """Every ``configs/task/*.yaml`` as a :class:`TaskScoring`, keyed by config name."""
    scorings = {}
    for path in sorted((Path(config_dir) / "task").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        try:
            scale = raw.get("scale", "percent")
            if scale not in SCALES:
                raise ValueError(f"scale must be one of {sorted(SCALES)}, got {scale!r}")
            breakdown = Breakdown(**raw["breakdown"]) if raw.get("breakdown") else None
            scorings[raw["name"]] = TaskScoring(
                name=raw["name"], benchmark=raw.get("benchmark", raw["name"]), metrics=dict(raw["metrics"]),
                scale=scale, breakdown=breakdown, lmms_tasks=tuple(raw.get("tasks", ())))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"task config {path}: {error}") from error
    return scorings


def _metric_values(scoring: TaskScoring, results: Mapping[str, Any]) -> float:
    """The task's headline value: each pattern's metric, averaged over matching tasks, in percent."""
    per_task = results.get("results")
    if not isinstance(per_task, Mapping):
        raise MalformedCell("results file has no 'results' object")
    values = []
    for pattern, metric in scoring.metrics.items():
        matched = [name for name in sorted(per_task) if fnmatch.fnmatchcase(name, pattern)]
        found = [per_task[name].get(f"{metric},none") for name in matched]
        found = [value for value in found if isinstance(value, (int, float))]
        if not found:
            raise MalformedCell(f"no '{metric},none' for tasks matching {pattern!r} "
                                f"(results has: {', '.join(sorted(per_task)) or 'nothing'})")
        values.extend(found)
    return sum(values) / len(values) * SCALES[scoring.scale]


def _breakdown_values(breakdown: Breakdown, samples: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
    """Overall and per-group accuracy (percent) from the samples."""
    groups: dict[str, list[float]] = {}
    for record in samples:
        entry = record.get(breakdown.field)
        if not isinstance(entry, Mapping) or breakdown.by not in entry or breakdown.score not in entry:
            raise MalformedCell(f"sample doc_id={record.get('doc_id')!r} has no "
                                f"{breakdown.field}.{breakdown.by} / .{breakdown.score}")
        groups.setdefault(str(entry[breakdown.by]), []).append(float(entry[breakdown.score]))
    if not groups:
        raise MalformedCell("the samples file is empty")
    everything = [score for scores in groups.values() for score in scores]
    columns = {column: 100.0 * sum(groups[key]) / len(groups[key])
               for key, column in breakdown.columns.items() if key in groups}
    return 100.0 * sum(everything) / len(everything), columns


def benchmark_values(scoring: TaskScoring, results: Mapping[str, Any],
                     samples: Optional[list[dict[str, Any]]] = None, *, where: str = "") -> dict[str, float]:
    """``{column: percent}`` for one finished cell of ``scoring``'s task.

    With a breakdown and samples, the overall score is recomputed from the samples too (it must
    agree with lmms-eval's aggregate) and the groups are added; without samples only the overall
    score is returned (and a warning names the cell).
    """
    overall = _metric_values(scoring, results)
    out = {scoring.benchmark: overall}
    if scoring.breakdown is None:
        return out
    if not samples:
        logger.warning("%s: no samples file, so %s has no %s", where or scoring.name, scoring.benchmark,
                       "/".join(scoring.breakdown.columns.values()))
        return out
    from_samples, groups = _breakdown_values(scoring.breakdown, samples)
    if abs(from_samples - overall) > OVERALL_TOLERANCE:
        logger.warning("%s: %s is %.2f in the results file but %.2f from the samples; using the samples",
                       where or scoring.name, scoring.benchmark, overall, from_samples)
    out[scoring.benchmark] = from_samples
    out.update(groups)
    return out
