"""The start of a sweep, in the launching process, before any job: pre-flight and the plan.

The sweeper (``hydra_plugins.vcast_sweeper``) expands the grid into one job per distinct cell
(:mod:`vcast.sweep.grid`) and calls :func:`check_and_plan`; :class:`SweepStart`
(``hydra.callbacks.start`` in ``configs/sweep.yaml``) does the same for a single cell. It checks
what the cells need from the machine (:mod:`vcast.sweep.environment`: checkpoints, benchmark data,
task folders), logs how many cells there are, how many are finished or running in another job,
where results go and, for SLURM, the partition and where it came from, and writes the progress
file. A missing checkpoint or dataset stops the sweep here with every problem listed (exit code 2),
unless ``preflight=false``; an invalid cell or an unimplemented method is listed and left to its
job, which records it.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from vcast.sweep.grid import GridJob, experiment_of
from vcast.sweep.progress import start_progress

logger = logging.getLogger("vcast.sweep")


class PreflightFailed(SystemExit):
    """The sweep cannot start (exit code 2); the problems are logged before it is raised."""

    def __init__(self) -> None:
        super().__init__(2)


def grid_problems(jobs: Sequence[GridJob], cwd: Optional[Path] = None) -> tuple[list[str], dict[int, tuple[str, str]]]:
    """``(machine problems, cell problems)`` of a sweep's jobs: checkpoints, data and task folders
    that are missing (each named once), then, by job number, ``(cell, problem)`` of the cells that
    are invalid or that pre-flight refuses (:func:`vcast.sweep.spec.preflight`, run once per job)."""
    from vcast.sweep.environment import data_problem, pretrained_problem
    from vcast.sweep.spec import preflight

    machine: dict[str, None] = {}  # ordered set
    cells: dict[int, tuple[str, str]] = {}
    checked: set[Any] = set()
    for job in jobs:
        if job.spec is None:
            cells[job.num] = (f"job {job.num} ({' '.join(job.overrides)})", f"invalid: {job.error}")
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
            cells[job.num] = (spec.name, problem)
    return list(machine), cells


def sweep_machine_problems(words: Sequence[str], cwd: Optional[Path] = None) -> list[str]:
    """The machine problems (checkpoints, benchmark data, task folders) that pre-flight would stop
    ``python -m vcast.sweep <words> -m`` with; one grid point per model and task is composed (the
    method, ratio and frame count need nothing from the machine)."""
    from vcast.sweep.grid import command_line_points, distinct_jobs, initialized

    representatives: dict[tuple[str, ...], list[str]] = {}
    for point in command_line_points(words):
        key = tuple(word for word in point if not word.startswith(("method=", "ratio=", "frames=")))
        representatives.setdefault(key, point)
    with initialized():
        jobs = distinct_jobs(list(representatives.values()))
    return grid_problems(jobs, cwd)[0]


def job_action(job: GridJob, results_root: Path, problem: Optional[str] = None) -> str:
    """What the sweep will do with ``job``: ``run``, ``skip (finished)``, ``busy (running in
    <holder>)`` (another live job holds the cell: this one will not run it twice),
    ``refuse (mismatch: ...)``, ``cannot run: <problem>`` (the cell's pre-flight ``problem``, from
    :func:`grid_problems`, e.g. an in-LLM method on a hybrid-attention model; its job records why
    without running) or ``invalid: ...``."""
    from vcast.results.tree import Cell
    from vcast.sweep.cell import identity_mismatch
    from vcast.sweep.execute import lock_holder

    if job.spec is None:
        return f"invalid: {job.error}"
    if problem is not None:
        return f"cannot run: {problem}"
    cell_dir = results_root / job.spec.relative_dir
    holder = lock_holder(cell_dir)
    if holder is not None:
        return f"busy (running in {holder})"
    cell = Cell(cell_dir)
    if not cell.is_complete or cell.record is None:
        return "run"
    differences = identity_mismatch(cell.record.spec, job.spec)
    return f"refuse (mismatch: {'; '.join(differences)})" if differences else "skip (finished)"


def check_and_plan(jobs: Sequence[GridJob], cfg: DictConfig, progress_dir: Optional[Path],
                   grid_points: Optional[int] = None) -> None:
    """Log the plan and every problem; raise :class:`PreflightFailed` on a machine problem
    (a warning instead with ``preflight=false``). ``jobs``: one per distinct cell; ``grid_points``:
    how many points of the grid they stand for (more when some name the same cell)."""
    cwd = Path(cfg.hydra.runtime.cwd)
    results_root = Path(cfg.results_root) if Path(cfg.results_root).is_absolute() else cwd / cfg.results_root
    machine, cells = grid_problems(jobs, cwd)
    strict = bool(cfg.get("preflight", True))
    for problem in machine:
        logger.log(logging.ERROR if strict else logging.WARNING, "pre-flight: %s", problem)
    for cell, problem in cells.values():
        logger.warning("pre-flight: %s: %s (its job records it)", cell, problem)
    if machine and strict:
        logger.error("pre-flight: %d problem(s); no cell was started. Fix them, or run with preflight=false to "
                     "start anyway", len(machine))
        raise PreflightFailed()
    actions = [job_action(job, results_root, cells.get(job.num, (None, None))[1]) for job in jobs]
    counts = Counter(action_kind(action) for action in actions)
    merged = "" if grid_points is None or grid_points == len(jobs) else (
        f" ({grid_points} grid points: a cell named at several, such as vanilla at every ratio, runs once)")
    logger.info("sweep: %d cell(s), one job each%s: %s; results in %s", len(jobs), merged,
                ", ".join(f"{counts[key]} {label}" for key, label in _LABELS if counts[key]) or "nothing to do",
                results_root.resolve())
    for job, action in zip(jobs, actions):
        if action.startswith(("refuse", "busy")):
            logger.warning("%s: will be %s", job.spec.name if job.spec else f"job {job.num}",
                           action.replace("refuse", "refused", 1))
    partition = slurm_partition(cfg)
    if partition is not None:
        logger.info("SLURM partition: %s", partition)
    if progress_dir is not None:
        start_progress(progress_dir, total=len(jobs), finished=len(jobs) - counts["run"],
                       cells=[job.spec.name for job in jobs if job.spec is not None])


def action_kind(action: str) -> str:
    """``run``, ``skip``, ``busy``, ``refuse``, ``cannot`` or ``invalid`` of a :func:`job_action` line."""
    return action.split(" ")[0].rstrip(":")


_LABELS = (("run", "to run"), ("skip", "finished already (skipped)"),
           ("busy", "running in another live job (not run twice)"),
           ("refuse", "refused (finished for another request; rerun_mismatched=true replaces them)"),
           ("cannot", "cannot run (pre-flight: each job records why, without running)"), ("invalid", "invalid"))
PARTITION_ENV = "VCAST_SLURM_PARTITION"


def slurm_partition(cfg: DictConfig) -> Optional[str]:
    """``<partition> (<where it came from>)`` when the sweep's launcher is SLURM, else None: the
    command line (``hydra.launcher.partition=...``), the environment (``VCAST_SLURM_PARTITION``),
    or the launcher config's default."""
    launcher = cfg.hydra.launcher
    if not str(launcher.get("_target_", "")).endswith("SlurmLauncher"):
        return None
    partition = launcher.get("partition")
    words = [*cfg.hydra.overrides.get("hydra", []), *cfg.hydra.overrides.get("task", [])]
    given = [word for word in words if word.lstrip("+~").startswith("hydra.launcher.partition=")]
    raw = OmegaConf.to_container(launcher, resolve=False).get("partition")
    if given:
        source = f"from the command line ({given[-1]})"
    elif isinstance(raw, str) and PARTITION_ENV in raw:
        source = (f"from {PARTITION_ENV}" if os.environ.get(PARTITION_ENV) else
                  f"the launcher config's default; set {PARTITION_ENV} or hydra.launcher.partition=<yours>")
    else:
        source = "set by the launcher or experiment config"
    return f"{partition} ({source})" if partition else f"none: SLURM's default partition ({source})"


class SweepStart(Callback):
    """Hydra callback: pre-flight and the plan of a single cell (a multirun's are its sweeper's; see
    the module docstring)."""

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
