"""Finished cells with chosen per-item answers, in the sweep's and lmms-eval 0.7.3's on-disk format.

For the per-sample analysis tests and docs: :func:`write_answers_cell` writes ``cell.json``,
``DONE``, ``lmms_eval/<model>/<date>_results.json`` and one ``<date>_samples_<lmms task>.jsonl``
per lmms task, each line shaped as that task's ``process_results`` logs it (the dicts of
:data:`vcast.report.per_sample.ITEM_FIELDS`), and the results file's metric computed from the
same answers with lmms-eval's arithmetic, so the tables and the analysis read one consistent run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from vcast.atomic_files import atomic_write_json, atomic_write_text
from vcast.report.scoring import TaskScoring
from vcast.results.record import CellEfficiency, CellRecord, write_record
from vcast.results.typed_json import from_json
from vcast.sweep.cell import CellSpec

DATE = "20260101_000000"


@dataclass(frozen=True)
class Answer:
    """One item: the parsed prediction, the right answer, and its category (Video-MME duration,
    MLVU question type; empty when the task has none)."""

    pred: str
    truth: str
    category: str = ""


def _sample(metric: str, doc_id: int, item: Answer) -> dict[str, Any]:
    right = item.pred == item.truth
    if metric == "videomme_perception_score":
        entry = {"question_id": f"{doc_id:04d}", "duration": item.category, "category": "c", "sub_category": "s",
                 "task_category": "t", "pred_answer": item.pred, "answer": item.truth, "score": float(right),
                 "videoID": f"v{doc_id}"}
    elif metric == "mvbench_accuracy":  # the raw reply, scored by lmms-eval's letter matching
        entry = {"pred_answer": f"({item.pred}) option" if item.pred else "", "gt_answer": item.truth,
                 "score": int(right)}
    elif metric == "mlvu_percetion_score":
        entry = {"question_id": f"q{doc_id}", "task_type": item.category, "pred_answer": item.pred,
                 "answer": item.truth}
    elif metric == "lvb_acc":
        entry = {"id": f"lvb{doc_id}", "duration_group": 15, "question_category": "c", "answer": item.truth,
                 "parsed_pred": item.pred}
    elif metric == "score":  # EgoSchema: option indices
        entry = {"pred": int(item.pred) if item.pred else -1, "ground_truth": int(item.truth)}
    elif metric == "vcast_synth_acc":
        entry = {"question_id": f"q{doc_id}", "category": item.category or "appear", "pred": item.pred,
                 "answer": item.truth, "score": float(right)}
    else:
        raise ValueError(f"no sample format for metric {metric!r}")
    return {"doc_id": doc_id, "target": item.truth, "filtered_resps": item.pred, "token_counts": [None],
            "doc_hash": "0", metric: entry, "input": f"question {doc_id}"}


def _metric_value(metric: str, items: Sequence[Answer]) -> float:
    """The lmms task's aggregate as lmms-eval 0.7.3 computes it from these answers."""
    right = [item.pred == item.truth for item in items]
    if metric == "mvbench_accuracy":
        answered = [r for item, r in zip(items, right) if item.pred != ""]
        return 100.0 * sum(answered) / len(answered) if answered else 0.0
    if metric == "mlvu_percetion_score":
        by_type: dict[str, list[bool]] = {}
        for item, r in zip(items, right):
            by_type.setdefault(item.category, []).append(r)
        return sum(100.0 * sum(v) / len(v) for v in by_type.values()) / len(by_type)
    if metric in ("lvb_acc", "score"):
        return sum(right) / len(right)
    return 100.0 * sum(right) / len(right)


def write_answers_cell(root: Path, spec: CellSpec, scoring: TaskScoring, answers: Mapping[str, Sequence[Answer]],
                       efficiency: Optional[dict[str, Any]] = None) -> Path:
    """A finished cell of ``spec`` whose lmms tasks (keys of ``answers``) gave these answers."""
    import fnmatch

    cell_dir = Path(root) / spec.relative_dir
    out = cell_dir / "lmms_eval" / "tiny"
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"results": {}, "n-samples": {}, "date": DATE}
    samples_files = []
    for lmms_task, items in answers.items():
        metric = next((m for pattern, m in scoring.metrics.items() if fnmatch.fnmatchcase(lmms_task, pattern)), None)
        if metric is None:
            raise ValueError(f"lmms task {lmms_task!r} matches no metric of task {scoring.name}")
        name = f"{DATE}_samples_{lmms_task}.jsonl"
        atomic_write_text(out / name, "".join(json.dumps(_sample(metric, i, item)) + "\n"
                                              for i, item in enumerate(items)))
        samples_files.append(f"lmms_eval/tiny/{name}")
        results["results"][lmms_task] = {"alias": lmms_task, f"{metric},none": _metric_value(metric, items)}
        results["n-samples"][lmms_task] = {"original": len(items), "effective": len(items)}
    atomic_write_json(out / f"{DATE}_results.json", results)
    write_record(cell_dir, CellRecord(
        cell=spec.name, status="ok", spec=spec, attempt=1, results_file=f"lmms_eval/tiny/{DATE}_results.json",
        samples_files=sorted(samples_files),
        efficiency=from_json(CellEfficiency, efficiency, "efficiency") if efficiency else None))
    return cell_dir


def answers_spec(experiment: str, model: str, frames: int, ratio: float, method: str, scoring: TaskScoring,
                 limit: Optional[float] = None) -> CellSpec:
    """A cell spec for :func:`write_answers_cell` (plugin fields are placeholders)."""
    return CellSpec(experiment=experiment, model=model, plugin="tiny", pretrained="tiny", prompt_key="tiny",
                    model_args={}, method=method, method_id=method, method_params={}, ratio=ratio, frames=frames,
                    task=scoring.name, lmms_tasks=list(scoring.lmms_tasks), limit=limit)
