"""A cell's page: its record (status, spec, scores, versions, efficiency), a summary of its
per-call records, its missing videos and the end of its log."""

from __future__ import annotations

import json
import math
from pathlib import Path

from vcast.report.site import html as H
from vcast.report.site.discovery import Experiment
from vcast.report.site.items import SiteCell
from vcast.results.tree import Cell

LOG_TAIL = 40  # lines of run.log on a cell page


def summable(field: str) -> bool:
    """Whether a per-call field adds up over calls (seconds, tokens, TFLOPs, items); a peak memory,
    a share or an attempt number does not, and its total is not shown."""
    return field.endswith("_s") or "tokens" in field or "tflops" in field or field in ("items", "decode_steps")


def efficiency_summary(cell: Cell) -> tuple[list[list[str]], int]:
    """(rows ``field, calls, total, mean, min, max`` over the cell's per-call efficiency records,
    records read) for every numeric field of the records (a torn last line is skipped)."""
    values: dict[str, list[float]] = {}
    records = cell.efficiency()
    for record in records:
        for key, value in record.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                values.setdefault(key, []).append(float(value))
    rows = [[key, str(len(v)), f"{sum(v):.6g}" if summable(key) else "–", f"{sum(v) / len(v):.6g}", f"{min(v):.6g}",
             f"{max(v):.6g}"] for key, v in sorted(values.items())]
    return rows, len(records)


def render_cell(experiment: Experiment, cell: SiteCell) -> str:
    rel = experiment.cell_page(cell)
    record = cell.record
    body = [H.paragraph(f"Cell {H.code(cell.rel)} of experiment {H.esc(experiment.name)}: "
                        f"{H.state_span(cell.state, cell.status)}.")]
    if record is None:
        body.append(H.note("No readable record (cell.json): the cell has not run (planned by a sweep), "
                           "is running, or its record is invalid (its status says so)."))
    else:
        if record.error:
            body.append(H.heading(2, "Error") + H.preformatted(record.error) + "\n")
        run = [("status", record.status), ("attempt", record.attempt), ("returncode", record.returncode),
               ("started_at", record.started_at), ("finished_at", record.finished_at),
               ("duration_s", record.duration_s), ("host", record.host), ("slurm_job_id", record.slurm_job_id),
               ("world_size", record.world_size)]
        run = [(key, value) for key, value in run if value is not None]
        run.append(("DONE marker", "present" if cell.source.done else "absent"))
        body.append(H.heading(2, "Status") + H.key_values(run))
        body.append(H.heading(2, "Spec") + H.key_values(sorted(record.spec.as_dict().items())))
        if record.scores:
            rows = [[task, metric, f"{value:.6g}" if isinstance(value, (int, float)) else str(value)]
                    for task, metrics in sorted(record.scores.items()) for metric, value in sorted(metrics.items())]
            body.append(H.heading(2, "Scores") + H.table(["lmms task", "metric", "value"], rows))
        if record.versions:
            body.append(H.heading(2, "Versions") + H.key_values(sorted(record.versions.items())))
        if record.efficiency is not None:
            body.append(H.heading(2, "Efficiency") + H.heading(3, "As recorded in cell.json") + H.key_values(
                sorted(record.efficiency.figures().items())))
    rows, count = efficiency_summary(cell.source)
    if rows:
        body.append(H.heading(3, f"Per-call records (efficiency/rank*.jsonl: {count} records)")
                    + H.table(["field", "records", "total", "mean", "min", "max"], rows))
    elif record is not None:
        body.append(H.note("No per-call efficiency records (efficiency/rank*.jsonl)."))
    if record is not None and record.results_file is not None:
        missing = record.missing_visuals
        body.append(H.heading(2, "Missing videos")
                    + H.paragraph(f"{H.esc(missing.count)} item(s) without a readable video (answered empty)."))
        if missing.items:
            keys = sorted({k for entry in missing.items for k in entry})
            body.append(H.table(keys, [[json.dumps(e.get(k)) if isinstance(e.get(k), (dict, list)) else
                                        str(e.get(k, "")) for k in keys] for e in missing.items]))
    tail = cell.source.log_tail(LOG_TAIL)
    if tail:
        body.append(H.heading(2, "run.log") + H.details(f"last {LOG_TAIL} lines", H.preformatted(tail),
                                                         opened=cell.state == "failed"))
    if record is not None:
        body.append(H.heading(2, "The record, cell.json") + H.details(
            "as written", H.preformatted(json.dumps(record.as_json(), indent=2, sort_keys=True))))
    crumbs = [("Results", "index.html"), (experiment.name, experiment.page), (cell.rel, None)]
    return H.page(rel, f"Cell {cell.rel}", "".join(body), crumbs)


def cell_inputs(cell: SiteCell) -> list[Path]:
    return cell.source.input_files()
