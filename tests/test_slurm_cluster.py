"""A real single-node SLURM cluster (tests.support.slurm_cluster): sbatch, submitit, job arrays.

Needs Debian's slurm-wlm + munge (``bash scripts/install_slurm.sh``) and root; skipped otherwise
with the precise reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.support.slurm_cluster import LocalSlurmCluster

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[1]


# Top-level functions: submitit pickles them by reference, the job imports this module.
def job_env_and_square(x: int) -> tuple[str, int]:
    return os.environ["SLURM_JOB_ID"], x * x


def array_task(x: int) -> tuple[str, int]:
    return os.environ.get("SLURM_ARRAY_TASK_ID", ""), x + 100


def sleep_long() -> None:
    # submitit's job process ignores SIGTERM ("Bypassing signal SIGTERM"); a task that ignores it
    # keeps its srun step alive ~7 s after a cancel (slurmstepd SIGKILLs it after KillWait, then
    # retries reporting to the already-gone srun). Dying on SIGTERM makes the cancel immediate.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    time.sleep(300)


@pytest.fixture
def slurm_env(
    slurm_cluster: LocalSlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> LocalSlurmCluster:
    """The cluster's client env (SLURM_CONF, the sacct shim on PATH) in os.environ for one test;
    PYTHONPATH lets submitit jobs import this module whatever the cwd. (``slurm_cluster`` is the
    session fixture of conftest.py.)"""
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)  # e.g. when the tests themselves run inside a SLURM job
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    )
    return slurm_cluster


def _executor(folder: Path, partition: str):  # -> submitit.AutoExecutor
    submitit = pytest.importorskip("submitit")
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(slurm_partition=partition, timeout_min=5, cpus_per_task=1)
    return executor


def _results(jobs: list, timeout_s: float = 120.0) -> list:  # jobs: list[submitit.Job]
    """``[job.result() ...]``, failing instead of hanging if the jobs do not finish in time."""
    deadline = time.monotonic() + timeout_s
    while not all(job.done() for job in jobs):
        assert time.monotonic() < deadline, [(j.job_id, j.state) for j in jobs]
        time.sleep(0.2)
    return [job.result() for job in jobs]


def _final_state(job, timeout_s: float = 60.0) -> str:  # job: submitit.Job
    """The job's SLURM state once finished; the result pickle can appear while the batch script
    is still exiting (RUNNING/COMPLETING), so poll sacct (the cluster's shim) for a while."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = job.watcher.get_state(job.job_id, mode="force")
        if state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "UNKNOWN"):
            return state
        if time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def test_sinfo_reports_idle_partition(slurm_env: LocalSlurmCluster) -> None:
    res = subprocess.run(
        ["sinfo", "-h", "-p", slurm_env.partition, "-o", "%P %a %T %D"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert res.stdout.split() == [f"{slurm_env.partition}*", "up", "idle", "1"]


def test_sbatch_wait_runs_job(slurm_env: LocalSlurmCluster, tmp_path: Path) -> None:
    res = subprocess.run(
        [
            "sbatch",
            "--wait",
            f"--chdir={tmp_path}",
            f"--output={tmp_path / 'slurm-%j.out'}",
            "--wrap",
            "echo hello > out.txt",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Submitted batch job ")
    assert (tmp_path / "out.txt").read_text() == "hello\n"


def test_submitit_job_result(slurm_env: LocalSlurmCluster, tmp_path: Path) -> None:
    executor = _executor(tmp_path / "submitit", slurm_env.partition)
    job = executor.submit(job_env_and_square, 7)
    [(job_id, square)] = _results([job])
    assert (job_id, square) == (job.job_id, 49)
    assert _final_state(job) == "COMPLETED"  # from the sacct shim


def test_submitit_job_array(slurm_env: LocalSlurmCluster, tmp_path: Path) -> None:
    executor = _executor(tmp_path / "submitit", slurm_env.partition)
    jobs = executor.map_array(array_task, [1, 2])
    assert len(jobs) == 2
    assert _results(jobs) == [("0", 101), ("1", 102)]
    assert all("_" in j.job_id for j in jobs)
    assert [_final_state(j) for j in jobs] == ["COMPLETED", "COMPLETED"]


def test_submitit_sees_cancelled_job(slurm_env: LocalSlurmCluster, tmp_path: Path) -> None:
    """Without sacct a job that ends without a result pickle would look UNKNOWN (= running)
    forever; the cluster's sacct shim reports CANCELLED, so job.result() raises instead."""
    submitit = pytest.importorskip("submitit")
    executor = _executor(tmp_path / "submitit", slurm_env.partition)
    job = executor.submit(sleep_long)
    deadline = time.monotonic() + 60
    while job.watcher.get_state(job.job_id, mode="force") != "RUNNING":
        assert time.monotonic() < deadline, f"job never started: {job.state}"
        time.sleep(0.5)
    job.cancel()
    deadline = time.monotonic() + 60
    while not job.done(force_check=True):
        assert time.monotonic() < deadline, f"cancelled job not seen as done: {job.state}"
        time.sleep(0.5)
    assert job.state.startswith("CANCELLED")
    job._results_timeout_s = 1  # no pickle will come
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
