"""Name the SLURM job a cell runs in after its experiment and cell.

SLURM names a whole job array once (``vcast-<experiment>``, from ``hydra.job.name``); each array
task renames itself to ``vcast:<cell>`` when it starts, so ``squeue``/``sacct`` say which cell
a task is. Best effort: a cluster that refuses the update (or has no ``scontrol``) only logs it.
"""

from __future__ import annotations

import logging
import os
import subprocess
from typing import Optional

logger = logging.getLogger("vcast.sweep")

SCONTROL_TIMEOUT_S = 15


def job_name(cell: str) -> str:
    """The SLURM name of the job that runs ``cell`` (SLURM keeps names to printable characters)."""
    return "vcast:" + "".join(c if c.isprintable() and not c.isspace() else "_" for c in cell)


def rename_slurm_job(cell: str) -> Optional[str]:
    """Rename the current SLURM job (array task) after ``cell``; its new name, or None outside a
    job the sweep submitted through submitit, or when the cluster refused."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id or os.environ.get("SUBMITIT_EXECUTOR") != "slurm":
        return None  # not a job the sweep submitted (e.g. a sweep run by hand inside an allocation)
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        # <array>_<task> names this task alone; the first task's SLURM_JOB_ID is the array's own id,
        # and an update through it would rename every task not yet started.
        job_id = f"{array}_{task}"
    name = job_name(cell)
    try:
        done = subprocess.run(["scontrol", "update", f"JobId={job_id}", f"JobName={name}"], capture_output=True,
                              text=True, timeout=SCONTROL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        logger.info("could not rename SLURM job %s: %s", job_id, error)
        return None
    if done.returncode != 0:
        logger.info("could not rename SLURM job %s: %s", job_id, (done.stderr or done.stdout).strip())
        return None
    return name
