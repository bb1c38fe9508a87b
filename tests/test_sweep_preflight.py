"""Before any job: the grid as Hydra expands it, checkpoints and data checked (exit 2 with every
problem named), and the dry run that prints the jobs and the sbatch script without submitting."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra")

from vcast.sweep.environment import (  # noqa: E402
    REPO, data_problem, pretrained_problem, resolve_pretrained,
)
from vcast.sweep.grid import job_overrides  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("params, words", [
    ({"frames": "32,64", "ratio": "0.15,0.25", "method": "vanilla,vcast"}, ["experiment=qwen3vl_8b"]),
    ({"frames": "16", "method": "a,b,c"}, ["method=vcast,fastv", "ratio=0.3,0.4", "-m"]),  # a key given twice
    ({}, ["task=vcast_synth", "limit=2"]),
])
def test_the_grid_is_hydras_own_expansion(params: dict, words: list[str]) -> None:
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = [f"{k}={v}" for k, v in params.items()] + [w for w in words if w != "-m"]
    hydras = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(given), None)[0]
    assert job_overrides(params, words) == [list(job) for job in hydras]


def test_a_local_checkpoint_resolves_against_the_folder_then_the_repo(tmp_path: Path) -> None:
    model = tmp_path / "here" / "model"
    model.mkdir(parents=True)
    assert pretrained_problem("model", cwd=tmp_path / "here") == f"{model} holds no config.json"
    (model / "config.json").write_text("{}")
    assert pretrained_problem("model", cwd=tmp_path / "here") is None
    assert resolve_pretrained("model", cwd=tmp_path / "here") == str(model)
    assert resolve_pretrained("configs", cwd=tmp_path) == str(REPO / "configs")  # found in the repo
    problem = pretrained_problem("no/such/checkpoint", cwd=tmp_path)
    assert problem == (f"pretrained 'no/such/checkpoint' not found (tried {tmp_path / 'no/such/checkpoint'} or "
                       f"{REPO / 'no/such/checkpoint'})")


def test_a_hub_id_must_be_cached_when_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    problem = pretrained_problem("Qwen/Qwen3-VL-8B-Instruct", cwd=tmp_path)
    assert problem is not None and "HF_HUB_OFFLINE" in problem and str(tmp_path / "hf" / "hub") in problem
    # The Hub cache's own layout (what huggingface_hub writes on download).
    repo = tmp_path / "hf" / "hub" / "models--Qwen--Qwen3-VL-8B-Instruct"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text("{}")
    assert pretrained_problem("Qwen/Qwen3-VL-8B-Instruct", cwd=tmp_path) is None


def test_task_data_is_checked_where_lmms_eval_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    data = {"root": "hf_home", "paths": ["videomme/data"], "hint": "unpack it"}
    expected = f"task 'videomme': data not found: {tmp_path / 'videomme/data'} (unpack it)"
    assert data_problem("videomme", data) == expected
    (tmp_path / "videomme" / "data").mkdir(parents=True)
    assert data_problem("videomme", data) is not None  # an empty folder is no data
    (tmp_path / "videomme" / "data" / "a.mp4").write_bytes(b"x")
    assert data_problem("videomme", data) is None
    assert data_problem("x", None) is None
    with pytest.raises(ValueError, match="'elsewhere'"):
        data_problem("x", {"root": "elsewhere", "paths": ["a"]})


def test_every_task_config_names_its_data() -> None:
    import yaml

    for path in sorted((ROOT / "configs" / "task").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())["data"]
        assert data["root"] in ("hf_home", "vcast") and data["paths"], path.name


def _sweep(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcast.sweep", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


@pytest.mark.parametrize("multirun", [True, False])
def test_a_missing_checkpoint_stops_the_sweep_before_any_job(tmp_path: Path, multirun: bool) -> None:
    methods = "method=vcast,fastv" if multirun else "method=vcast"
    run = _sweep([f"results_root={tmp_path / 'results'}", "model=tiny_qwen3vl", "model.pretrained=gone/model",
                  "task=egoschema", methods, *(["-m"] if multirun else [])],
                 cwd=tmp_path, env={"HF_HOME": str(tmp_path / "hf")})
    output = run.stdout + run.stderr
    assert run.returncode == 2, output[-3000:]
    assert f"pretrained 'gone/model' is neither a local folder (tried {tmp_path / 'gone/model'}" in output
    assert f"task 'egoschema': data not found: {tmp_path / 'hf' / 'egoschema' / 'videos'}" in output
    assert "no cell was started" in output and "Traceback" not in output
    assert not any((tmp_path / "results").glob("*/*")), "a cell folder was written"


def test_the_dry_run_prints_jobs_and_the_sbatch_script(tmp_path: Path) -> None:
    run = _sweep([f"results_root={tmp_path}", "experiment=demo", "method=vanilla,vcast", "ratio=0.25,0.5",
                  "hydra/launcher=slurm_h100", "hydra.launcher.partition=h100", "dry_run=true", "-m"], cwd=ROOT)
    output = run.stdout + run.stderr
    assert run.returncode in (0, 2), output[-3000:]  # 2: the held-out set is not generated here
    lines = output.splitlines()
    assert "   0  demo/demo_qwen3vl/32f/vanilla/r1/vcast_synth_heldout  run" in lines
    assert "   3  demo/demo_qwen3vl/32f/vcast/r0.5/vcast_synth_heldout  run" in lines
    if shutil.which("srun"):
        assert "#SBATCH --array=0-3%4" in lines and "#SBATCH --job-name=vcast-demo" in lines
        assert "#SBATCH --partition=h100" in lines
    else:
        assert any(line.startswith("# cannot render it on this machine") for line in lines)
    assert not any(tmp_path.glob("demo/*")) and not (tmp_path / ".hydra").exists()  # nothing ran or was written


def test_the_dry_run_exits_1_on_an_invalid_cell(tmp_path: Path) -> None:
    run = _sweep([f"results_root={tmp_path}", "model=qwen3vl_8b", "method=vcast", "ratio=0.5,1.5", "dry_run=true",
                  "preflight=false", "-m"], cwd=ROOT)
    output = run.stdout + run.stderr
    assert "   1  -  invalid: ratio must be in (0, 1], got 1.5" in output.splitlines(), output[-2000:]
    assert "# pre-flight: pretrained 'Qwen/Qwen3-VL-8B-Instruct'" in output  # shown, not fatal: preflight=false
    assert run.returncode == 1
