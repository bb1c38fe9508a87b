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
    """The sweep's command line, run; ``env``: variables to set (None: unset)."""
    merged = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "vcast.sweep", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={key: value for key, value in merged.items() if value is not None})


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


def test_the_dry_run_prints_one_job_per_cell_and_the_sbatch_script(tmp_path: Path) -> None:
    run = _sweep([f"results_root={tmp_path}", "experiment=demo", "method=vanilla,vcast", "ratio=0.25,0.5",
                  "hydra/launcher=slurm_h100", "hydra.launcher.partition=h100", "dry_run=true", "-m"], cwd=ROOT)
    output = run.stdout + run.stderr
    assert run.returncode in (0, 2), output[-3000:]  # 2: the held-out set is not generated here
    lines = output.splitlines()
    # 4 grid points, 3 cells: vanilla is one r1 cell at both ratios, numbered once
    assert lines[0] == f"# 3 cell(s), one job each (4 grid points; a cell named at several runs once); results in {tmp_path}"
    assert lines[1:4] == ["   0  demo/demo_qwen3vl/32f/vanilla/r1/vcast_synth_heldout  run",
                          "   1  demo/demo_qwen3vl/32f/vcast/r0.25/vcast_synth_heldout  run",
                          "   2  demo/demo_qwen3vl/32f/vcast/r0.5/vcast_synth_heldout  run"]
    assert lines[4] == "# 3 run"
    assert "# partition: h100 (from the command line (hydra.launcher.partition=h100))" in lines
    if shutil.which("srun"):
        assert "#SBATCH --array=0-2%3" in lines and "#SBATCH --job-name=vcast-demo" in lines
        assert "#SBATCH --partition=h100" in lines
    else:
        assert any(line.startswith("# cannot render it on this machine") for line in lines)
    assert not any(tmp_path.glob("demo/*")) and not (tmp_path / ".hydra").exists()  # nothing ran or was written


def _planned(output: str) -> list[str]:
    """The cells of a dry run's job lines, in job order (each line's number checked)."""
    jobs = [line.split() for line in output.splitlines() if line[:4].strip().isdigit()]
    assert [int(words[0]) for words in jobs] == list(range(len(jobs)))
    return [words[1] for words in jobs]


def test_the_slurm_dry_run_of_a_paper_table_plans_exactly_its_distinct_cells(tmp_path: Path) -> None:
    import yaml

    run = _sweep([f"results_root={tmp_path}", "experiment=qwen3vl_8b", "hydra/launcher=slurm_h100", "dry_run=true",
                  "-m"], cwd=ROOT, env={"VCAST_SLURM_PARTITION": None})
    source = "gpu (the launcher config's default; set VCAST_SLURM_PARTITION or hydra.launcher.partition=<yours>)"
    output = run.stdout + run.stderr
    cells = _planned(output)
    params = yaml.safe_load((ROOT / "configs/experiment/qwen3vl_8b.yaml").read_text())["hydra"]["sweeper"]["params"]
    frames, ratios, tasks, methods = (len(str(params[k]).split(",")) for k in ("frames", "ratio", "task", "method"))
    # vanilla once per (frames, task); every other method at every ratio
    assert len(cells) == len(set(cells)) == frames * tasks * (1 + (methods - 1) * ratios) == 104, output[:2000]
    assert sum("/vanilla/r1/" in cell for cell in cells) == frames * tasks
    assert f"# {len(cells)} cell(s), one job each ({frames * ratios * tasks * methods} grid points" in output
    assert f"# partition: {source}" in output.splitlines()
    if shutil.which("srun"):
        assert f"#SBATCH --array=0-{len(cells) - 1}%64" in output.splitlines()


def test_the_partition_from_the_environment_is_named_so(tmp_path: Path) -> None:
    run = _sweep([f"results_root={tmp_path}", "experiment=demo", "method=vanilla", "hydra/launcher=slurm_h100",
                  "dry_run=true", "preflight=false", "-m"], cwd=ROOT, env={"VCAST_SLURM_PARTITION": "h100q"})
    assert "# partition: h100q (from VCAST_SLURM_PARTITION)" in run.stdout.splitlines(), run.stdout[-2000:]


def test_a_cell_held_by_a_live_job_is_reported_busy_and_not_run_twice(tmp_path: Path) -> None:
    from vcast.sweep.execute import run_cell
    from vcast.sweep.grid import command_line_grid

    words = [f"results_root={tmp_path}", "experiment=demo", "method=vanilla,vcast", "ratio=0.25"]
    (vanilla, vcast) = [job.spec for job in command_line_grid(words)]
    cell = tmp_path / vanilla.relative_dir
    code = ("import sys, time; from pathlib import Path; from vcast.sweep.execute import CellLock; "
            "lock = CellLock(Path(sys.argv[1])); assert lock.acquire(); print('held', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(cell)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        run = _sweep([*words, "dry_run=true", "preflight=false", "-m"], cwd=ROOT)
        lines = run.stdout.splitlines()
        busy = next(line for line in lines if "/vanilla/r1/" in line)
        assert f"busy (running in host {__import__('socket').gethostname()}, pid {holder.pid}, since " in busy, busy
        assert lines[3] == "# 1 busy, 1 run"
        record = run_cell(vanilla, tmp_path)  # the job that finds it held does not run it
        assert record.status == "busy" and f"pid {holder.pid}" in record.error
        assert not (cell / "cell.json").exists() and not any(cell.parent.glob(".*staging*"))
    finally:
        holder.kill()
        holder.wait()
    from vcast.sweep.execute import lock_holder

    assert lock_holder(cell) is None  # released with the process that held it
    assert vcast.name.endswith("vcast/r0.25/vcast_synth_heldout")


def test_the_dry_run_exits_1_on_an_invalid_cell(tmp_path: Path) -> None:
    run = _sweep([f"results_root={tmp_path}", "model=qwen3vl_8b", "method=vcast", "ratio=0.5,1.5", "dry_run=true",
                  "preflight=false", "-m"], cwd=ROOT)
    output = run.stdout + run.stderr
    assert "   1  -  invalid: ratio must be in (0, 1], got 1.5" in output.splitlines(), output[-2000:]
    assert "# pre-flight: pretrained 'Qwen/Qwen3-VL-8B-Instruct'" in output  # shown, not fatal: preflight=false
    assert run.returncode == 1
