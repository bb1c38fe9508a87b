"""A 2-cell sweep of the tiny Qwen3-VL through Hydra's submitit launchers: on a real single-node
SLURM cluster (skipped, with the reason, where SLURM cannot start) and on submitit's local
executor (always)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")

from tests.test_sweep import finish, sweep  # noqa: E402
from vcast.sweep.cell import is_complete, read_cell  # noqa: E402

pytestmark = pytest.mark.slow
GRID = ["task=vcast_synth", "method=vanilla,vcast", "ratio=0.25", "limit=2"]


def _check_cells(results: Path) -> list[dict]:
    cells = results / "adhoc" / "tiny_qwen3vl" / "8f"
    records = []
    for name in ("vanilla/r1/vcast_synth", "vcast/r0.25/vcast_synth"):
        assert is_complete(cells / name), name
        records.append(read_cell(cells / name))
    assert [r["efficiency"]["items"] for r in records] == [2, 2]
    return records


def test_two_cell_sweep_on_slurm(slurm_cluster, tiny_dirs: dict, synth_data: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    for key in [k for k in os.environ if k.startswith("SLURM_") and k != "SLURM_CONF"]:
        monkeypatch.delenv(key)
    launcher = ["hydra/launcher=slurm_h100", f"hydra.launcher.partition={slurm_cluster.partition}",
                "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2",
                "hydra.launcher.timeout_min=20"]
    finish(sweep([*GRID, *launcher, "-m"], tmp_path / "results", tiny_dirs))
    records = _check_cells(tmp_path / "results")
    job_ids = [r["slurm_job_id"] for r in records]
    assert all(job_id and "_" in job_id for job_id in job_ids), job_ids  # array tasks of one job
    assert len({job_id.split("_")[0] for job_id in job_ids}) == 1
    names = set()
    for job_id in job_ids:  # each array task renamed itself after its cell
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
        names.add(next(word for word in shown.split() if word.startswith("JobName=")))
    assert names == {"JobName=vcast:adhoc/tiny_qwen3vl/8f/vanilla/r1/vcast_synth",
                     "JobName=vcast:adhoc/tiny_qwen3vl/8f/vcast/r0.25/vcast_synth"}


def test_two_cell_sweep_on_submitit_local(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    finish(sweep([*GRID, "hydra/launcher=local", "hydra.launcher.gpus_per_node=0", "-m"], tmp_path / "results",
                 tiny_dirs))
    records = _check_cells(tmp_path / "results")
    assert all(r["slurm_job_id"] is None for r in records)
