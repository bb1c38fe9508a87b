"""``python -m vcast.sweep experiment=<name> -m``: run an experiment's grid, one cell per Hydra job.

Without ``-m`` it runs the single cell the overrides describe (``model=... task=... method=...
ratio=... frames=...``). ``hydra/launcher=slurm_h100`` submits the cells to SLURM (a job array),
``hydra/launcher=local`` runs them as local processes through submitit; the default runs them
one after another in this process. See ``configs/README.md``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from vcast.sweep.spec import preflight, spec_from_config

logger = logging.getLogger("vcast.sweep")

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "configs")


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="sweep")
def main(cfg: DictConfig) -> dict[str, Any]:
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import to_absolute_path

    from vcast.sweep.execute import record_failure, run_cell

    if cfg.logger not in ("none", "wandb"):
        raise ValueError(f"logger must be 'none' or 'wandb', got {cfg.logger!r}")
    experiment = HydraConfig.get().runtime.choices.get("experiment") or "adhoc"
    results_root = Path(to_absolute_path(cfg.results_root))
    try:
        spec = spec_from_config(cfg, experiment)
    except ValueError as error:  # a bad grid point: record it and let the sweep go on
        logger.error("invalid cell: %s", error)
        return _report({"status": "invalid", "error": str(error)})
    problem = preflight(spec)
    if problem is not None:
        record = record_failure(spec, results_root, problem)
    else:
        timeout = None if cfg.timeout_min is None else float(cfg.timeout_min) * 60
        record = run_cell(spec, results_root, timeout_s=timeout, rerun_mismatched=bool(cfg.rerun_mismatched))
    if cfg.logger == "wandb" and record.get("status") in ("ok", "failed", "oom"):
        from vcast.sweep.wandb_log import log_cell

        wandb_cfg = OmegaConf.to_container(cfg.wandb, resolve=True)
        log_cell(record, project=wandb_cfg["project"], mode=wandb_cfg["mode"], entity=wandb_cfg.get("entity"),
                 directory=results_root / experiment / "wandb")
    logger.info("%s: %s", spec.name, record["status"])
    return _report({"cell": spec.name, "status": record["status"], "error": record.get("error", "")})


def _report(outcome: dict[str, Any]) -> dict[str, Any]:
    """Hand the job's outcome to the sweep summary (the sweep folder is shared by every job)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from vcast.sweep.summary import record_outcome

    runtime = HydraConfig.get()
    output = Path(runtime.runtime.output_dir)
    record_outcome(output.parent if runtime.mode == RunMode.MULTIRUN else output, outcome)
    return outcome


if __name__ == "__main__":
    from vcast.sweep.summary import exit_code

    main()
    raise SystemExit(exit_code())
