"""``python -m vcast.sweep experiment=<name> -m``: run an experiment's grid, one cell per Hydra job.

Without ``-m`` it runs the single cell the overrides describe (``model=... task=... method=...
ratio=... frames=...``). ``hydra/launcher=slurm_h100`` submits the cells to SLURM (a job array),
``hydra/launcher=local`` runs them as local processes through submitit; the default runs them
one after another in this process. ``dry_run=true`` prints the jobs (and the sbatch script)
without running anything (:mod:`vcast.sweep.plan`). See ``configs/README.md``.

Exit codes: 0 all cells ok or skipped; 1 a cell was invalid, failed, ran out of memory or was
refused as a mismatch; 2 pre-flight stopped the sweep before any job; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from vcast.sweep.slurm_job import rename_slurm_job
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
    rename_slurm_job(spec.name)
    problem = preflight(spec)
    if problem is not None:
        record = record_failure(spec, results_root, problem)
    else:
        timeout = None if cfg.timeout_min is None else float(cfg.timeout_min) * 60
        console = sys.stderr if sys.stderr.isatty() else None  # lmms-eval's progress bars, when someone watches
        record = run_cell(spec, results_root, timeout_s=timeout, rerun_mismatched=bool(cfg.rerun_mismatched),
                          console=console)
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

    from vcast.sweep.progress import progress_line
    from vcast.sweep.summary import record_outcome

    runtime = HydraConfig.get()
    output = Path(runtime.runtime.output_dir)
    directory = output.parent if runtime.mode == RunMode.MULTIRUN else output
    record_outcome(directory, outcome)
    line = progress_line(directory, outcome)
    if line is not None:
        logger.info("%s", line)
    return outcome


INTERRUPTED = ("interrupted: finished cells are kept; the cell that was running left only a staging folder, "
               "redone from scratch next time. Run the same command again to resume.")


def run(argv: list[str]) -> int:
    """The command line's entry point: the dry run, or the sweep; its exit code."""
    from vcast.sweep.plan import dry_run, requested
    from vcast.sweep.summary import exit_code

    try:
        if requested(argv):
            return dry_run(argv)
        main()
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return 130
    return exit_code()


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
