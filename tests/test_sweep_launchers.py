"""A 2-cell sweep of the tiny Qwen3-VL through Hydra's submitit launchers: on a real single-node
SLURM cluster (skipped, with the reason, where SLURM cannot start) and on submitit's local
executor (always). Its grid has 4 points naming 2 cells (vanilla and First (2x2) have fixed
ratios): each launcher gets one job per cell, and the counts printed agree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")

from tests.test_sweep import finish, sweep  # noqa: E402
from tests.support.cell_files import is_complete, read_cell  # noqa: E402

pytestmark = pytest.mark.slow
GRID = ["task=vcast_synth", "method=vanilla,first_2x2", "ratio=0.25,0.5", "limit=2"]
CELLS = ("vanilla/r1/vcast_synth", "first_2x2/r0.25/vcast_synth")


def _check_cells(results: Path, output: str) -> list[dict]:
    cells = results / "adhoc" / "tiny_qwen3vl" / "8f"
    records = []
    for name in CELLS:
        assert is_complete(cells / name), name
        records.append(read_cell(cells / name))
    assert [r["efficiency"]["items"] for r in records] == [2, 2]
    assert [r["attempt"] for r in records] == [1, 1]  # each cell ran once
    # one job per cell: planned, run and summed up alike
    assert "sweep: 2 cell(s), one job each (4 grid points" in output, output[-3000:]
    assert "sweep done: 2 cell(s): 2 ok" in output
    assert len((results / ".hydra" / "sweep").glob("*/outcomes.jsonl").__next__().read_text().splitlines()) == 2
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
    output = finish(sweep([*GRID, *launcher, "-m"], tmp_path / "results", tiny_dirs))
    records = _check_cells(tmp_path / "results", output)
    job_ids = [r["slurm_job_id"] for r in records]
    assert all(job_id and "_" in job_id for job_id in job_ids), job_ids  # array tasks of one job
    (array,) = {job_id.split("_")[0] for job_id in job_ids}
    tasks = subprocess.run(["sacct", "-n", "-X", "-j", array, "-o", "JobID"], capture_output=True, text=True).stdout
    assert sorted(tasks.split()) == sorted(job_ids), tasks  # the array held each cell once
    assert f"SLURM partition: {slurm_cluster.partition} (from the command line" in output
    names = set()
    for job_id in job_ids:  # each array task renamed itself after its cell
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
        names.add(next(word for word in shown.split() if word.startswith("JobName=")))
    assert names == {f"JobName=vcast:adhoc/tiny_qwen3vl/8f/{cell}" for cell in CELLS}


def test_two_cell_sweep_on_submitit_local(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    output = finish(sweep([*GRID, "hydra/launcher=local", "hydra.launcher.gpus_per_node=0", "-m"],
                          tmp_path / "results", tiny_dirs))
    records = _check_cells(tmp_path / "results", output)
    assert all(r["slurm_job_id"] is None for r in records)
