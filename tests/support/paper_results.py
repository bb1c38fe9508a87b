"""Results trees in the sweep's and lmms-eval's on-disk format, made from the paper's numbers.

For the report's round-trip test: every cell a paper table needs is written as the sweep would
(``cell.json``, ``DONE``, ``lmms_eval/<model>/<date>_results.json`` and, for Video-MME, a
``*_samples_videomme.jsonl`` of 2700 per-question records), with per-question counts chosen so
that lmms-eval's own arithmetic gives back the published numbers: MVBench as 20 subtasks of 200
questions, LongVideoBench as a fraction of 1337, EgoSchema of 500, Video-MME as 900 questions per
duration. OOM entries become ``status: oom`` cells. Nothing here knows a published value in
advance: all of it is read from ``paper_tables.csv``.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from vcast.atomic_files import atomic_write_json, atomic_write_text
from vcast.report.collect import COLUMNS, EFFICIENCY_COLUMNS
from vcast.report.layouts import DERIVED_KEYS, LAYOUTS, Layout
from vcast.report.names import model_name
from vcast.report.paper import PaperTables
from vcast.report.products import PRODUCTS
from vcast.report.scoring import TaskScoring, load_task_scorings
from vcast.report.tables import build_table
from vcast.results.record import CellEfficiency, CellRecord, write_record
from vcast.results.typed_json import from_json
from vcast.sweep.cell import CellSpec

logger = logging.getLogger(__name__)

MVBENCH_SUBTASKS = (
    "action_antonym", "action_count", "action_localization", "action_prediction", "action_sequence",
    "character_order", "counterfactual_inference", "egocentric_navigation", "episodic_reasoning",
    "fine_grained_action", "fine_grained_pose", "moving_attribute", "moving_count", "moving_direction",
    "object_existence", "object_interaction", "object_shuffle", "scene_transition", "state_change",
    "unexpected_action")
MVBENCH_PER_SUBTASK = 200
LVB_QUESTIONS = 1337
EGOSCHEMA_QUESTIONS = 500
VIDEOMME_PER_DURATION = 900
DURATIONS = ("short", "medium", "long")
TOLERANCE = 0.1
EFFICIENCY_KEYS = {column: key for key, column in EFFICIENCY_COLUMNS.items()}  # paper column -> cell.json field
DATE = "20260101_000000"


@dataclass(frozen=True)
class Unmatched:
    """A paper row whose numbers no real run can produce together (the paper is inconsistent)."""

    table: str
    frames: int
    ratio: float
    method: str
    detail: str


def videomme_counts(overall: float, groups: dict[str, float]) -> tuple[dict[str, int], bool]:
    """Correct answers per duration (of 900 each) whose percentages are all within 0.1 of the
    published ``overall`` and ``groups`` (some durations may be unpublished: then free).

    Returns the counts and whether every published number is matched; when none match (the
    published Short/Medium/Long do not average to Overall) the overall is kept and the groups
    are matched as closely as possible.
    """
    per = VIDEOMME_PER_DURATION
    # Totals whose percentage prints as the published overall (it feeds the table's Average).
    centre = round(overall * 3 * per / 100)
    totals = sorted((t for t in range(centre - 2, centre + 3) if abs(t * 100 / (3 * per) - overall) < 0.05 - 1e-9),
                    key=lambda t: abs(t * 100 / (3 * per) - overall))  # ties in error keep the closest total
    fixed = [d for d in DURATIONS if d in groups]
    free = [d for d in DURATIONS if d not in groups]
    ranges = [range(max(0, round(groups[d] * per / 100) - 2), min(per, round(groups[d] * per / 100) + 2) + 1)
              for d in fixed]
    best, best_error = None, math.inf
    for combo, target in itertools.product(itertools.product(*ranges), totals):
        counts = dict(zip(fixed, combo))
        rest = target - sum(combo)
        if not free and rest != 0:
            continue
        if free:  # share the rest evenly among unpublished durations
            shares = _even_split(rest, len(free))
            if any(not 0 <= s <= per for s in shares):
                continue
            counts.update(zip(free, shares))
        error = max(abs(counts[d] * 100 / per - groups[d]) for d in fixed) if fixed else 0.0
        if error < best_error:
            best, best_error = counts, error
    if best is not None and best_error <= TOLERANCE - 1e-9:
        return best, True
    # Inconsistent paper row: keep the overall exactly, spread it over durations like the groups.
    weights = {d: groups.get(d, overall) for d in DURATIONS}
    scale = centre / sum(w * per / 100 for w in weights.values())
    counts = {d: min(per, round(weights[d] * per / 100 * scale)) for d in DURATIONS}
    counts["long"] += centre - sum(counts.values())
    return counts, False


def _even_split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` integers differing by at most one (the first ones larger)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _spread(total: int, parts: int, cap: int) -> list[int]:
    """``total`` split into ``parts`` integers in [0, cap], unequal (so a mean differs from a median)."""
    base = _even_split(total, parts)
    for i in range(0, parts - 1, 2):  # move some answers between neighbours, keeping the sum
        shift = min(3 * (i % 4 + 1), cap - base[i], base[i + 1])
        base[i] += shift
        base[i + 1] -= shift
    return base


def _results_json(tasks: dict[str, dict[str, Any]], counts: dict[str, int]) -> dict[str, Any]:
    """A results file shaped like lmms-eval 0.7.3's."""
    results = {name: {"alias": name, **{f"{k},none": v for k, v in metrics.items()},
                      **{f"{k}_stderr,none": "N/A" for k in metrics}} for name, metrics in tasks.items()}
    return {
        "results": results, "group_subtasks": {name: [] for name in tasks}, "configs": {name: {"task": name} for name in tasks},
        "versions": {name: 0.0 for name in tasks}, "n-shot": {name: 0 for name in tasks},
        "higher_is_better": {name: {k: True for k in metrics} for name, metrics in tasks.items()},
        "n-samples": {name: {"original": counts[name], "effective": counts[name]} for name in tasks},
        "config": {"model": "paper", "model_args": "", "batch_size": 1}, "git_hash": None, "date": DATE,
        "model_name": "paper", "model_name_sanitized": "paper",
    }


def _task_files(scoring: TaskScoring, values: dict[str, float]) -> tuple[dict[str, Any], Optional[list[dict]], bool]:
    """lmms-eval's results (and samples) for one task whose published numbers are ``values``."""
    name, benchmark = scoring.name, scoring.benchmark
    if name == "mvbench":
        per_subtask = _spread(round(values[benchmark] * len(MVBENCH_SUBTASKS) * MVBENCH_PER_SUBTASK / 100),
                              len(MVBENCH_SUBTASKS), MVBENCH_PER_SUBTASK)
        tasks = {f"mvbench_{sub}": {"mvbench_accuracy": 100.0 * right / MVBENCH_PER_SUBTASK}
                 for sub, right in zip(MVBENCH_SUBTASKS, per_subtask)}
        return _results_json(tasks, {t: MVBENCH_PER_SUBTASK for t in tasks}), None, True
    if name in ("longvideobench", "egoschema"):
        lmms_task, metric = next(iter(scoring.metrics.items()))
        questions = LVB_QUESTIONS if name == "longvideobench" else EGOSCHEMA_QUESTIONS
        fraction = round(values[benchmark] * questions / 100) / questions
        return _results_json({lmms_task: {metric: fraction}}, {lmms_task: questions}), None, True
    if name == "videomme":
        columns = scoring.breakdown.columns
        groups = {d: values[columns[d]] for d in DURATIONS if columns[d] in values}
        counts, matched = videomme_counts(values[benchmark], groups)
        samples = []
        for duration in DURATIONS:
            for i in range(VIDEOMME_PER_DURATION):
                doc_id = len(samples)
                score = 1.0 if i < counts[duration] else 0.0
                samples.append({"doc_id": doc_id, "target": "A", "filtered_resps": "A" if score else "B",
                                "token_counts": [None], "doc_hash": "0",
                                "videomme_perception_score": {"question_id": f"{doc_id:04d}", "duration": duration,
                                                              "pred_answer": "A" if score else "B", "answer": "A",
                                                              "score": score}})
        overall = 100.0 * sum(counts.values()) / (3 * VIDEOMME_PER_DURATION)
        results = _results_json({"videomme": {"videomme_perception_score": overall}}, {"videomme": len(samples)})
        return results, samples, matched
    # Benchmarks reported as one percentage (MLVU, the synthetic one): the value itself.
    lmms_task, metric = next(iter(scoring.metrics.items()))
    value = values[benchmark] / (100.0 if scoring.scale == "fraction" else 1.0)
    return _results_json({lmms_task: {metric: value}}, {lmms_task: 1}), None, True


def _spec(experiment: str, model: str, frames: int, ratio: float, method: str, scoring: TaskScoring) -> CellSpec:
    return CellSpec(experiment=experiment, model=model, plugin="paper", pretrained="paper", prompt_key="paper",
                    model_args={}, method=method, method_id=method, method_params={}, ratio=ratio, frames=frames,
                    task=scoring.name, lmms_tasks=list(scoring.lmms_tasks))


def write_cell(root: Path, spec: CellSpec, status: str, results: Optional[dict] = None,
               samples: Optional[list[dict]] = None, efficiency: Optional[dict] = None) -> Path:
    """One cell folder as the sweep leaves it (``ok`` with files and DONE, or ``oom``)."""
    cell_dir = Path(root) / spec.relative_dir
    cell_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {}
    if status == "ok":
        out = cell_dir / "lmms_eval" / "paper"
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / f"{DATE}_results.json", results)
        record["results_file"] = f"lmms_eval/paper/{DATE}_results.json"
        record["samples_files"] = []
        if samples is not None:
            name = f"{DATE}_samples_{spec.lmms_tasks[0]}.jsonl"
            atomic_write_text(out / name, "".join(json.dumps(s) + "\n" for s in samples))
            record["samples_files"] = [f"lmms_eval/paper/{name}"]
        record["efficiency"] = from_json(CellEfficiency, efficiency, "efficiency") if efficiency else None
    else:
        record["error"] = "CUDA out of memory" if status == "oom" else "failed"
    write_record(cell_dir, CellRecord(cell=spec.name, status=status, spec=spec, attempt=1, **record))
    return cell_dir


def _tasks_of(layout: Layout, scorings: dict[str, TaskScoring]) -> dict[str, TaskScoring]:
    by_benchmark = {name: scoring for scoring in scorings.values() for name in scoring.benchmarks}
    needed = {column.source or column.key for column in layout.columns if column.key not in DERIVED_KEYS}
    tasks = {by_benchmark[name].name: by_benchmark[name] for name in needed if name in by_benchmark}
    if layout.task:
        tasks = {layout.task: scorings[layout.task]}
    return tasks


def write_paper_results(root: Path, paper: Optional[PaperTables] = None) -> list[Unmatched]:
    """Every cell of every product's paper tables under ``root``; returns the paper rows whose
    published numbers cannot all be produced by one consistent run."""
    paper = paper or PaperTables()
    scorings = load_task_scorings()
    empty = pd.DataFrame(columns=COLUMNS)
    unmatched: list[Unmatched] = []
    written: set[Path] = set()
    for product in PRODUCTS.values():
        for output in product.tables:
            if output.layout is None:
                continue
            layout = LAYOUTS[output.layout]
            table = build_table(empty, layout)
            for entry in table.rows:
                for scoring in _tasks_of(layout, scorings).values():
                    names = scoring.benchmarks if not layout.efficiency else [scoring.benchmark, *EFFICIENCY_KEYS]
                    raw = {name: paper.raw(entry.paper_table, model_name(layout.model), entry.frames,
                                           entry.ratio, entry.paper_method, "Performance" if layout.efficiency
                                           and name == scoring.benchmark else name) for name in names}
                    raw = {k: v for k, v in raw.items() if v is not None}
                    if not raw:
                        continue
                    spec = _spec(output.experiments[0], layout.model, entry.frames, entry.ratio, entry.method, scoring)
                    if spec.relative_dir in written:
                        continue  # the same cell in two sections (the default V-CAST)
                    written.add(spec.relative_dir)
                    if "OOM" in raw.values():
                        write_cell(root, spec, "oom")
                        continue
                    values = {k: float(v) for k, v in raw.items()}
                    results, samples, matched = _task_files(scoring, values)
                    efficiency = {EFFICIENCY_KEYS[k]: v for k, v in values.items() if k in EFFICIENCY_KEYS}
                    write_cell(root, spec, "ok", results, samples, efficiency)
                    if not matched:
                        unmatched.append(Unmatched(entry.paper_table, entry.frames, entry.ratio, entry.paper_method,
                                                   f"{scoring.benchmark} groups do not average to its overall"))
    return unmatched
