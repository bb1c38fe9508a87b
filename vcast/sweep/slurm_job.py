"""The SLURM job a cell runs in: named after its cell, and deaf to the time-limit signal once the
cell is settled.

SLURM names a whole job array once (``vcast-<experiment>``, from ``hydra.job.name``); each array
task renames itself to ``vcast:<cell>`` when it starts, so ``squeue``/``sacct`` say which cell
a task is. Best effort: a cluster that refuses the update (or has no ``scontrol``) only logs it.

SLURM signals a job ``signal_delay_s`` before its time limit, at its first time-limit check (every
30 s) past that point, and submitit's handler requeues the job. A cell that finishes in the seconds
before that check still gets the signal, while its process returns the result or shuts down: the
handler would requeue a finished job, and once Python's shutdown has put the signal's default action
back (it does for every handler written in Python), the signal kills the process and SLURM records
the finished job as FAILED. :func:`ignore_time_limit_signal` closes both windows.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from typing import Optional

logger = logging.getLogger("vcast.sweep")

SCONTROL_TIMEOUT_S = 15
# submitit's time-limit and preemption signal, and where a user may change it (its documented variable)
SUBMITIT_SIGNAL_ENV = "SUBMITIT_PREEMPT_SIGNAL"
SUBMITIT_DEFAULT_SIGNAL = "USR2"


def _in_submitted_job() -> bool:
    """Whether this process is a SLURM job that the sweep submitted through submitit."""
    return bool(os.environ.get("SLURM_JOB_ID")) and os.environ.get("SUBMITIT_EXECUTOR") == "slurm"


def job_name(cell: str) -> str:
    """The SLURM name of the job that runs ``cell`` (SLURM keeps names to printable characters)."""
    return "vcast:" + "".join(c if c.isprintable() and not c.isspace() else "_" for c in cell)


def rename_slurm_job(cell: str) -> Optional[str]:
    """Rename the current SLURM job (array task) after ``cell``; its new name, or None outside a
    job the sweep submitted through submitit, or when the cluster refused."""
    if not _in_submitted_job():
        return None  # not a job the sweep submitted (e.g. a sweep run by hand inside an allocation)
    job_id = os.environ["SLURM_JOB_ID"]
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


def ignore_time_limit_signal() -> Optional[signal.Signals]:
    """Ignore, from now until the process ends, the signal SLURM sends before the time limit (see the
    module docstring): the job's cell is settled, and a requeue would only find it done. The signal
    ignored, or None outside a job the sweep submitted through submitit (a process of the user's own,
    where the signal means what they made it mean). Call it in the main thread."""
    if not _in_submitted_job():
        return None
    name = os.environ.get(SUBMITIT_SIGNAL_ENV, SUBMITIT_DEFAULT_SIGNAL).upper()
    try:
        signum = signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]
    except KeyError:
        logger.info("%s=%s names no signal: the time-limit signal is left to submitit", SUBMITIT_SIGNAL_ENV, name)
        return None
    signal.signal(signum, signal.SIG_IGN)  # SIG_IGN, unlike a Python handler, survives Python's shutdown
    return signum
