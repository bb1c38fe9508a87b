"""Optional wandb logging (``logger=wandb``): one run per cell with its config, scores and
efficiency figures. ``wandb.mode=offline`` writes runs to disk for a later ``wandb sync``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vcast.results.record import CellRecord

logger = logging.getLogger(__name__)


def log_cell(record: CellRecord, project: str, mode: str, directory: Path, entity: str | None = None) -> str:
    """Log one finished (or failed) cell; returns the wandb run's folder."""
    import wandb

    spec = record.spec
    directory.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=project, entity=entity, mode=mode, dir=str(directory), name=record.cell,
        group=spec.experiment, job_type="eval", reinit="create_new",
        config={**spec.as_dict(), "status": record.status},
        tags=[spec.model, spec.method, spec.task, f"r{spec.ratio:g}", f"{spec.frames}f", spec.variant, spec.profile],
    )
    try:
        summary: dict[str, Any] = {"status": record.status, "duration_s": record.duration_s}
        for task, metrics in record.scores.items():
            for metric, value in metrics.items():
                summary[f"score/{task}/{metric}"] = value
        for key, value in (record.efficiency.figures() if record.efficiency is not None else {}).items():
            if isinstance(value, (int, float)):
                summary[f"efficiency/{key}"] = value
        if record.error:
            summary["error"] = record.error
        run.log({k: v for k, v in summary.items() if isinstance(v, (int, float))})
        for key, value in summary.items():
            run.summary[key] = value
        return str(run.dir)
    finally:
        run.finish()
