"""``python -m vcast.sweep experiment=X hydra/launcher=slurm_h100 dry_run=true -m``: the sweep's jobs
and, for SLURM, the sbatch script of its job array, printed; nothing is run or submitted.

One line per job, one job per distinct cell: its index (the SLURM array task id), its cell and what
the sweep would do with it (run; skip: finished; busy: running in another live job; refuse: finished
for another request; invalid), the counts, then the pre-flight problems and, for SLURM, the
partition and where it came from. The sbatch text is
submitit's own rendering of the launcher's parameters, so it is the script a real submission
writes (it needs ``srun`` on the machine, as submitting does).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from omegaconf import OmegaConf

from vcast.sweep.grid import command_line_points, compose_job, distinct_jobs, initialized

logger = logging.getLogger("vcast.sweep")

_FLAGS = ("-m", "--multirun")


def sbatch_script(launcher: dict[str, Any], jobs: int) -> str:
    """The sbatch file submitit writes for a job array of ``jobs`` tasks with the Hydra submitit
    launcher's parameters ``launcher`` (``hydra.launcher``, resolved)."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    params = {key: value for key, value in launcher.items() if key != "_target_"}
    # The same split as hydra_submitit_launcher's BaseSubmititLauncher.launch.
    init = {"slurm_max_num_timeout": params.pop("max_num_timeout")} if "max_num_timeout" in params else {}
    executor = submitit.AutoExecutor(folder=params.pop("submitit_folder"), cluster="slurm", **init)
    generic = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{key if key in generic else f"slurm_{key}": value for key, value in params.items()})
    slurm = executor._executor  # submitit's SlurmExecutor: renders without submitting
    slurm.parameters["map_count"] = jobs
    return slurm._make_submission_file_text(slurm._submitit_command_str, "dry-run")


def dry_run(arguments: Sequence[str], print_line: Any = print) -> int:
    """Print the plan of ``python -m vcast.sweep <arguments>``; 2 when pre-flight finds a machine
    problem (unless ``preflight=false``), 1 when a job is invalid, else 0."""
    from hydra.core.hydra_config import HydraConfig

    from vcast.sweep.start import action_kind, grid_problems, job_action, slurm_partition

    words = [word for word in arguments if word not in _FLAGS and not word.startswith("dry_run=")]
    points = command_line_points(words)
    with initialized():
        jobs = distinct_jobs(points)
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(words)
        primary = compose_job([w for w, o in zip(words, parsed) if not o.is_sweep_override()])
        HydraConfig.instance().set_config(primary)  # the launcher's ${hydra:...} interpolations
        cwd = Path.cwd()
        results_root = Path(primary.results_root)
        results_root = results_root if results_root.is_absolute() else cwd / results_root
        launcher = OmegaConf.to_container(primary.hydra.launcher, resolve=True)
        strict = bool(primary.get("preflight", True))
        partition = slurm_partition(primary)
    merged = "" if len(points) == len(jobs) else f" ({len(points)} grid points; a cell named at several runs once)"
    print_line(f"# {len(jobs)} cell(s), one job each{merged}; results in {results_root.resolve()}")
    machine, cells = grid_problems(jobs, cwd)
    actions = [job_action(job, results_root, cells.get(job.num, (None, None))[1]) for job in jobs]
    for job, action in zip(jobs, actions):
        print_line(f"{job.num:4d}  {job.spec.name if job.spec else '-'}  {action}")
    counts = Counter(action_kind(action) for action in actions)
    print_line("# " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
    for problem in machine:
        print_line(f"# pre-flight: {problem}")
    target = str(launcher.get("_target_", ""))
    if partition is not None:
        print_line(f"# partition: {partition}")
    if target.endswith("SlurmLauncher"):
        print_line(f"# sbatch script of the job array ({len(jobs)} task(s), one per cell); not submitted")
        try:
            print_line(sbatch_script(launcher, len(jobs)))
        except (RuntimeError, OSError) as error:
            print_line(f"# cannot render it on this machine: {error}")
    else:
        print_line(f"# launcher {target or 'basic (in this process)'}: nothing submitted")
    if machine and strict:
        return 2
    return 1 if any(job.spec is None for job in jobs) else 0


def requested(arguments: Sequence[str]) -> bool:
    """Whether the command line asks for a dry run (``dry_run=true``)."""
    values = [word.split("=", 1)[1].strip().lower() for word in arguments if word.startswith("dry_run=")]
    return bool(values) and values[-1] in ("true", "1", "yes")
