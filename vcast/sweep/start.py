"""The start of a sweep, in the launching process, before any job: pre-flight and the plan.

:class:`SweepStart` (``hydra.callbacks.start`` in ``configs/sweep.yaml``) expands the grid
(:mod:`vcast.sweep.grid`), checks what the cells need from the machine
(:mod:`vcast.sweep.environment`: checkpoints, benchmark data, task folders), logs how many cells
there are, how many are already finished and where results go, and writes the progress file.
A missing checkpoint or dataset stops the sweep here with every problem listed (exit code 2),
unless ``preflight=false``; an invalid cell or an unimplemented method is listed and left to its
job, which records it.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from vcast.sweep.grid import GridJob, experiment_of, grid_jobs
from vcast.sweep.progress import start_progress

logger = logging.getLogger("vcast.sweep")


class PreflightFailed(SystemExit):
    """The sweep cannot start (exit code 2); the problems are logged before it is raised."""

    def __init__(self) -> None:
        super().__init__(2)


def grid_problems(jobs: Sequence[GridJob], cwd: Optional[Path] = None) -> tuple[list[str], list[str]]:
    """``(machine problems, cell problems)`` of a sweep's jobs: checkpoints, data and task folders
    that are missing (each named once), then cells that are invalid or cannot run."""
    from vcast.sweep.environment import data_problem, pretrained_problem
    from vcast.sweep.spec import preflight

    machine: dict[str, None] = {}  # ordered set
    cells = []
    checked: set[Any] = set()
    for job in jobs:
        if job.spec is None:
            cells.append(f"job {job.num} ({' '.join(job.overrides)}): invalid: {job.error}")
            continue
        spec = job.spec
        for key, check in ((("pretrained", spec.pretrained), lambda: pretrained_problem(spec.pretrained, cwd)),
                           (("data", spec.task), lambda: data_problem(spec.task, job.data))):
            if key not in checked:
                checked.add(key)
                problem = check()
                if problem:
                    machine[problem] = None
        for folder in spec.include_paths:
            if not Path(folder).is_dir():
                machine[f"include path {folder} is not a folder"] = None
        problem = preflight(spec)
        if problem:
            cells.append(f"{spec.name}: {problem}")
    return list(machine), cells


def job_action(job: GridJob, results_root: Path) -> str:
    """What the sweep will do with ``job``: ``run``, ``skip (finished)``, ``refuse (mismatch: ...)``
    or ``invalid: ...``."""
    from vcast.sweep.cell import identity_mismatch, is_complete, read_cell

    if job.spec is None:
        return f"invalid: {job.error}"
    cell_dir = results_root / job.spec.relative_dir
    if not is_complete(cell_dir):
        return "run"
    differences = identity_mismatch((read_cell(cell_dir) or {}).get("spec") or {}, job.spec)
    return f"refuse (mismatch: {'; '.join(differences)})" if differences else "skip (finished)"


def check_and_plan(jobs: Sequence[GridJob], cfg: DictConfig, progress_dir: Optional[Path]) -> None:
    """Log the plan and every problem; raise :class:`PreflightFailed` on a machine problem
    (a warning instead with ``preflight=false``)."""
    cwd = Path(cfg.hydra.runtime.cwd)
    results_root = Path(cfg.results_root) if Path(cfg.results_root).is_absolute() else cwd / cfg.results_root
    machine, cells = grid_problems(jobs, cwd)
    strict = bool(cfg.get("preflight", True))
    for problem in machine:
        logger.log(logging.ERROR if strict else logging.WARNING, "pre-flight: %s", problem)
    for problem in cells:
        logger.warning("pre-flight: %s (its job records it)", problem)
    if machine and strict:
        logger.error("pre-flight: %d problem(s); no cell was started. Fix them, or run with preflight=false to "
                     "start anyway", len(machine))
        raise PreflightFailed()
    actions = {}  # cell (or job) -> action; two grid points may name one cell (vanilla at every ratio)
    for job in jobs:
        actions.setdefault(job.spec.name if job.spec else f"job {job.num}", job_action(job, results_root))
    counts = Counter(action.split(" ")[0].rstrip(":") for action in actions.values())
    logger.info("sweep: %d job(s), %d cell(s): %s; results in %s", len(jobs), len(actions),
                ", ".join(f"{counts[key]} {label}" for key, label in _LABELS if counts[key]) or "nothing to do",
                results_root.resolve())
    for name, action in actions.items():
        if action.startswith("refuse"):
            logger.warning("%s: will be %s", name, action.replace("refuse", "refused"))
    if progress_dir is not None:
        start_progress(progress_dir, total=len(jobs), finished=len(jobs) - counts["run"],
                       cells=[job.spec.name for job in jobs if job.spec is not None])


_LABELS = (("run", "to run"), ("skip", "finished already (skipped)"), ("refuse", "refused (finished for another "
            "request; rerun_mismatched=true replaces them)"), ("invalid", "invalid"))


class SweepStart(Callback):
    """Hydra callback: pre-flight and the plan before the first job (see the module docstring)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        params = OmegaConf.to_container(config.hydra.sweeper.params, resolve=False) if config.hydra.sweeper.get(
            "params") else {}
        jobs = grid_jobs({k: str(v) for k, v in (params or {}).items()}, list(config.hydra.overrides.task))
        check_and_plan(jobs, config, Path(config.hydra.sweep.dir))

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from vcast.sweep.spec import spec_from_config

        try:
            spec = spec_from_config(config, experiment_of(config))
        except ValueError:
            return  # the job records it as invalid
        data = config.task.get("data")
        job = GridJob(0, tuple(config.hydra.overrides.task), spec=spec,
                      data=None if data is None else OmegaConf.to_container(data, resolve=True))
        check_and_plan([job], config, None)
