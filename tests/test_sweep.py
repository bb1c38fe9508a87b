"""Sweeps: Hydra configs, cells run through real lmms-eval subprocesses, resumability after a kill,
failures recorded, data parallelism, wandb offline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("hydra")
pytest.importorskip("lmms_eval")

from tests.support.cell_files import DONE_FILE, is_complete, read_cell  # noqa: E402
from vcast.sweep.cell import CellSpec  # noqa: E402
from vcast.sweep.execute import failure_status, format_model_args, run_cell  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
TINY_QWEN_ARGS = {"max_pixels": 16384, "min_pixels": 4096, "attn_implementation": "sdpa"}


def tiny_spec(tiny_dirs: dict, method: str = "vcast", ratio: float = 0.25, **overrides) -> CellSpec:
    fields = dict(
        experiment="t", model="tiny_qwen3vl", plugin="vcast_qwen3_vl", pretrained=str(tiny_dirs["qwen3_vl"]),
        prompt_key="qwen3_vl", model_args=dict(TINY_QWEN_ARGS), method=method, method_id=method,
        method_params={}, ratio=ratio, frames=8, task="vcast_synth", lmms_tasks=["vcast_synth"], limit=3,
    )
    fields.update(overrides)
    return CellSpec(**fields)


def sweep(args: list[str], results: Path, tiny_dirs: dict, **popen) -> subprocess.Popen:
    command = [sys.executable, "-m", "vcast.sweep", f"results_root={results}", "model=tiny_qwen3vl",
               f"model.pretrained={tiny_dirs['qwen3_vl']}", "frames=8", "limit=3", *args]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, **popen)


def finish(process: subprocess.Popen, timeout: float = 900) -> str:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-4000:]
    return output


# Configs ---------------------------------------------------------------------------------------

def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="sweep", overrides=overrides, return_hydra_config=True)


PAPER_GRIDS = {  # experiment -> (model, frames, ratios, tasks, methods), from the paper's tables (tab:qwen_results, ...)
    "qwen3vl_8b": ("qwen3vl_8b", "32,64", "0.15,0.25", 4, 7),
    "llava_ov": ("llava_ov_7b", "32", "0.25", 4, 10),
    "llava_video": ("llava_video_7b", "64", "0.25", 4, 7),
    "efficiency": ("qwen3vl_8b", "32", "0.25", 1, 8),
    "ablation_temporal": ("qwen3vl_8b", "32,64", "0.25", 2, 5),
}


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml")))
def test_every_experiment_composes_into_valid_cells(experiment: str) -> None:
    """Each grid point's method, model and task configs exist and make a valid cell spec, which passes
    pre-flight and runs each method in the variant its experiment names (profile=reproduce, the default);
    under profile=clean, each method's first cell runs variant "paper"."""
    from tests.test_sweep_profiles import assert_runs_variant
    from vcast.sweep.grid import PointComposer, command_line_points, distinct_jobs, experiment_of, initialized, job_overrides
    from vcast.sweep.spec import spec_from_config

    cfg = _compose([f"experiment={experiment}"])
    params = cfg.hydra.sweeper.params
    grid = PointComposer()  # the sweep's planner; its compositions are reused for profile=clean below
    with initialized():
        jobs = distinct_jobs(command_line_points([f"experiment={experiment}"]), grid)  # every distinct cell
    assert [job.error for job in jobs if job.spec is None] == []
    assert {job.spec.plugin for job in jobs} <= {"vcast_qwen3_vl", "vcast_llava_ov"}
    assert all(job.spec.lmms_tasks for job in jobs)
    assert {job.spec.method for job in jobs} == set(str(params.method).split(","))
    named = dict(cfg.get("variants") or {})
    assert set(named) <= set(str(params.method).split(",")), "variants for methods not in the grid"
    for job in {job.spec.method: job for job in reversed(jobs)}.values():  # each method's first cell
        assert job.spec.profile == "reproduce", job.spec.name
        assert_runs_variant(job.spec, named.get(job.spec.method, "paper"))
        with initialized():  # profile is a plain value: the cell's own composition, copied, with it set
            clean = spec_from_config(grid.compose([*job.overrides, "profile=clean"]), experiment)
        assert clean.profile == "clean" and clean.relative_dir.parts[1:] == job.spec.relative_dir.parts[1:]
        assert_runs_variant(clean, "paper")
    if experiment in PAPER_GRIDS:
        model, frames, ratios, tasks, methods = PAPER_GRIDS[experiment]
        assert (cfg.model.name, str(params.frames), str(params.ratio)) == (model, frames, ratios)
        assert (len(str(params.task).split(",")), len(str(params.method).split(","))) == (tasks, methods)
    # The grid's planner composes once per choice of configs and sets plain values (frames, ratio) on a
    # copy: the same cells as Hydra's own composition of each point, at every frames x ratio.
    first = {key: str(params[key]).split(",")[0] for key in ("method", "task")}
    points = [point for point in job_overrides(dict(params), [f"experiment={experiment}"])
              if all(f"{key}={value}" in point for key, value in first.items())]
    assert len(points) == len(str(params.frames).split(",")) * len(str(params.ratio).split(","))
    points = points[:2] + points[2:][-1:]  # the first, the next and the last: each grid value changes once
    hydras = [_compose(point) for point in points]
    with initialized():
        composer = PointComposer()  # one for the grid: every point after the first is a copy with its values set
        ours = [composer.compose(point) for point in points]
    for point, mine, theirs in zip(points, ours, hydras):
        assert spec_from_config(mine, experiment_of(mine)) == spec_from_config(theirs, experiment_of(theirs)), point


@pytest.mark.parametrize("method", sorted(p.stem for p in (CONFIGS / "method").glob("*.yaml")))
def test_every_method_config_is_runnable(method: str) -> None:
    """Every method config passes the sweep's preflight and ``attach``'s own parameter check (at its
    fixed ratio or 0.25); an in-LLM method's plan fits the real models' depths (28 and 36 layers)."""
    import vcast
    from vcast.families import get_family
    from vcast.models.attach import _check_param_values
    from vcast.models.llm_plan import LLMInfo
    from vcast.registry import get_method, is_input_method, is_llm_method
    from vcast.sweep.spec import preflight, spec_from_config

    spec = spec_from_config(_compose([f"method={method}", "ratio=0.25"]), "x")
    assert preflight(spec) is None, preflight(spec)
    assert spec.method_id in vcast.available_methods()
    if is_input_method(spec.method_id):  # changes the processor's input: its plan is the check
        assert vcast.input_plan(spec.method_id, spec.ratio, **spec.method_params).method == spec.method_id
        return
    if not is_llm_method(spec.method_id):
        _check_param_values(spec.method_id, spec.ratio, dict(spec.method_params))
        return
    for llm in (LLMInfo.of(get_family("llava_onevision"), 28), LLMInfo.of(get_family("qwen3_vl"), 36)):
        plan = get_method(spec.method_id)(spec.ratio, llm, **spec.method_params)
        plan.check(llm)
        assert plan.stages
        if plan.pre_method is not None:
            _check_param_values(plan.pre_method, plan.pre_ratio, dict(plan.pre_params))


def test_real_benchmarks_are_lmms_eval_tasks() -> None:
    from lmms_eval.tasks import TaskManager

    from vcast.eval.run import TASKS_DIR

    known = set(TaskManager("ERROR", include_path=str(TASKS_DIR)).all_tasks)
    for path in sorted((CONFIGS / "task").glob("*.yaml")):
        task = _compose([f"task={path.stem}"]).task
        assert set(task.tasks) <= known, path.name


def test_vanilla_always_names_the_r1_cell() -> None:
    from vcast.sweep.spec import spec_from_config

    cells = {spec_from_config(_compose(["method=vanilla", f"ratio={r}"]), "x").relative_dir for r in (0.15, 0.25)}
    assert cells == {Path("x/qwen3vl_8b/32f/vanilla/r1/videomme")}
    assert spec_from_config(_compose(["method=vcast", "ratio=0.15"]), "x").relative_dir.parts[-2] == "r0.15"


@pytest.mark.parametrize("override, bad", [("ratio=1.5", "1.5"), ("frames=0", "0"), ("processes=0", "0")])
def test_bad_grid_values_are_named(override: str, bad: str) -> None:
    from vcast.sweep.spec import spec_from_config

    with pytest.raises(ValueError, match=bad):
        spec_from_config(_compose([override]), "x")


def test_model_args_format() -> None:
    assert format_model_args({"a": 1, "b": [1.0, 0.5], "c": True, "d": None}) == "a=1,b=[1.0,0.5],c=true"
    with pytest.raises(ValueError, match="x,y"):
        format_model_args({"bad": "x,y"})


def test_oom_is_told_apart_from_other_failures() -> None:
    assert failure_status("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB") == "oom"
    assert failure_status("ValueError: cannot decode video /x.mp4") == "failed"


# Cells -----------------------------------------------------------------------------------------

def test_cell_runs_records_and_is_then_skipped(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    spec = tiny_spec(tiny_dirs)
    record = run_cell(spec, tmp_path)
    cell = tmp_path / "t/tiny_qwen3vl/8f/vcast/r0.25/vcast_synth"
    assert record.status == "ok", record.log_tail
    assert is_complete(cell) and read_cell(cell)["status"] == "ok"
    assert read_cell(cell)["record_version"] == 2 and set(read_cell(cell)["scores"]) == {"vcast_synth"}
    assert 0 <= record.scores["vcast_synth"]["vcast_synth_acc"] <= 100
    eff = record.efficiency
    assert eff.items == 3 and eff.total_latency_s > 0 and eff.throughput_items_per_s > 0
    assert eff.prefill_latency_s > 0 and eff.generation_latency_s > 0 and eff.peak_memory_mb > 0
    assert eff.mean_video_tokens_kept == pytest.approx(eff.mean_video_tokens_total / 4, rel=0.1)
    assert (cell / record.results_file).is_file() and (cell / "run.log").is_file()
    assert not list(cell.parent.glob(".vcast_synth.staging-*"))
    done = (cell / DONE_FILE).stat().st_mtime_ns
    again = run_cell(spec, tmp_path)
    assert again.status == "skipped" and (cell / DONE_FILE).stat().st_mtime_ns == done
    assert again.with_status("ok") == record  # the skipped cell's record is the one written


def test_failing_cells_record_the_error_and_are_retried(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    broken = tmp_path / "tasks" / "vcast_synth_broken"
    broken.mkdir(parents=True)
    source = ROOT / "vcast" / "eval" / "tasks" / "vcast_synth"
    (broken / "vcast_synth_broken.yaml").write_text(
        (source / "vcast_synth.yaml").read_text().replace("task: vcast_synth", "task: vcast_synth_broken"))
    (broken / "utils.py").write_text((source / "utils.py").read_text())
    (broken / "data" / "videos").mkdir(parents=True)
    lines = (synth_data / "vcast_synth.jsonl").read_text().splitlines()
    (broken / "data" / "vcast_synth.jsonl").write_text("\n".join(lines[:2]) + "\n")
    for line in lines[:2]:
        (broken / "data" / json.loads(line)["video"]).write_bytes(b"\x00 corrupt mp4")
    spec = tiny_spec(tiny_dirs, task="broken", lmms_tasks=["vcast_synth_broken"],
                     include_paths=[str(tmp_path / "tasks")])
    record = run_cell(spec, tmp_path / "results")
    cell = tmp_path / "results" / spec.relative_dir
    assert record.status == "failed" and read_cell(cell)["status"] == "failed"
    assert "cannot decode video" in record.log_tail and ".mp4" in record.log_tail
    assert not (cell / DONE_FILE).exists() and (cell / "run.log").is_file()
    assert run_cell(spec, tmp_path / "results").attempt == 2  # not finished, so tried again

    assert "every item's video was unreadable" in read_cell(cell)["error"]

    missing = tiny_spec(tiny_dirs, method="fastvid_not_here")
    from vcast.sweep.spec import preflight
    assert "fastvid_not_here" in preflight(missing)


def test_a_missing_video_costs_its_item_not_the_cell(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    """One of three videos is gone: the cell finishes, the item is answered empty (scored as a
    wrong answer) and recorded by id in cell.json and status."""
    from vcast.sweep.status import cell_rows

    task_dir = tmp_path / "tasks" / "vcast_synth_gap"
    source = ROOT / "vcast" / "eval" / "tasks" / "vcast_synth"
    task_dir.mkdir(parents=True)
    (task_dir / "vcast_synth_gap.yaml").write_text(
        (source / "vcast_synth.yaml").read_text().replace("task: vcast_synth", "task: vcast_synth_gap"))
    (task_dir / "utils.py").write_text((source / "utils.py").read_text())
    (task_dir / "data" / "videos").mkdir(parents=True)
    lines = (synth_data / "vcast_synth.jsonl").read_text().splitlines()[:3]
    (task_dir / "data" / "vcast_synth.jsonl").write_text("\n".join(lines) + "\n")
    for line in lines[1:]:  # the first item's video is missing
        video = json.loads(line)["video"]
        (task_dir / "data" / video).write_bytes((synth_data / video).read_bytes())
    spec = tiny_spec(tiny_dirs, task="gap", lmms_tasks=["vcast_synth_gap"], include_paths=[str(tmp_path / "tasks")])
    record = run_cell(spec, tmp_path / "results")
    assert record.status == "ok", record.log_tail
    missing = record.missing_visuals
    assert missing.count == 1 and missing.items[0]["task"] == "vcast_synth_gap"
    assert missing.items[0]["doc_id"] == 0 and "is missing" in missing.items[0]["error"]
    assert record.efficiency.items == 2  # only the readable items reached the model
    (row,) = cell_rows(tmp_path / "results")
    assert row[1].endswith("1 missing video(s)")


# Sweeps ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_baseline_configs_sweep_on_tiny_llava(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    """Method configs -> sweep -> lmms-eval plugin on the tiny LLaVA-OneVision: a merging method that
    reads the vision encoder (VisionZip + V-CAST budgeting, its params from the config), a pure
    pruning one and one with its own budget, each cell ok with the tokens it really kept."""
    command = [sys.executable, "-m", "vcast.sweep", f"results_root={tmp_path}", "experiment=demo", "model=tiny_llava_ov",
               f"model.pretrained={tiny_dirs['llava_onevision']}", "frames=8", "limit=2", "ratio=0.25",
               "task=vcast_synth", "method=visionzip_vcast,vidcom2,dycoke", "-m"]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    cells = {path.parts[-4]: json.loads(path.read_text()) for path in tmp_path.rglob("cell.json")}
    assert sorted(cells) == ["dycoke", "vidcom2", "visionzip_vcast"]
    for name, record in cells.items():
        assert record["status"] == "ok", record.get("log_tail")
        efficiency = record["efficiency"]
        share = efficiency["mean_video_tokens_kept"] / efficiency["mean_video_tokens_total"]
        assert share == pytest.approx(0.25, abs=0.01) if name != "dycoke" else share > 0.4
    assert cells["visionzip_vcast"]["spec"]["method_params"] == {"temporal": "curvature", "variant": "paper"}
    assert {record["spec"]["variant"] for record in cells.values()} == {"paper"}  # no experiment names others


@pytest.mark.slow
def test_in_llm_method_configs_sweep_on_tiny_llava(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    """In-LLM method configs through the sweep and the lmms-eval plugin on the tiny LLaVA-OneVision: a
    multi-stage drop (PDrop), one that recycles dropped tokens (SparseVLM) and one with its own schedule
    (FrameFusion); each cell ok, and fewer tokens per layer than entered. Every in-LLM method runs
    through the plugin in tests/test_eval_plugins.py, and the other in-LLM configs compose into the demo
    grid's cells (test_every_experiment_composes_into_valid_cells[demo_full]; make demo-full runs them)."""
    import vcast
    from vcast.registry import is_llm_method

    methods = ["framefusion", "pdrop", "sparsevlm"]
    assert all(is_llm_method(m) and m in vcast.available_methods() for m in methods)
    command = [sys.executable, "-m", "vcast.sweep", f"results_root={tmp_path}", "experiment=demo", "model=tiny_llava_ov",
               f"model.pretrained={tiny_dirs['llava_onevision']}", "frames=8", "limit=2", "ratio=0.6",
               "task=vcast_synth", f"method={','.join(methods)}", "-m"]  # 0.6: PDrop's layer average is reachable on 2 layers
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    cells = {path.parts[-4]: json.loads(path.read_text()) for path in tmp_path.rglob("cell.json")}
    assert sorted(cells) == methods
    for name, record in cells.items():
        assert record["status"] == "ok", (name, record.get("log_tail"))
        efficiency = record["efficiency"]
        entered = efficiency["mean_video_tokens_kept"] / efficiency["mean_video_tokens_total"]
        if name == "framefusion":  # its cost budget may be used up before the LLM (see its file)
            assert 0 <= efficiency["layer_retention"] <= entered
        else:
            assert 0 < efficiency["layer_retention"] < entered, name


@pytest.mark.slow
def test_killed_sweep_rerun_completes_only_the_missing_cells(tiny_dirs: dict, synth_data: Path,
                                                             tmp_path: Path) -> None:
    results = tmp_path / "results"
    grid = ["task=vcast_synth", "method=vanilla,vcast", "ratio=0.25,0.5", "-m"]  # 3 cells (vanilla once)
    first = sweep(grid, results, tiny_dirs, process_group=0)  # a group of its own, which its runs join
    cells = results / "adhoc" / "tiny_qwen3vl" / "8f"
    deadline = time.monotonic() + 600
    while not list(cells.glob("*/*/vcast_synth/DONE")):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0][-3000:]
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the sweep and its lmms-eval child, mid-way
    first.wait()
    done_before = {p.parent: (p.stat().st_mtime_ns, read_cell(p.parent)["started_at"])
                   for p in cells.glob("*/*/vcast_synth/DONE")}
    assert len(done_before) == 1

    output = finish(sweep(grid, results, tiny_dirs))
    finished = sorted(str(p.parent.relative_to(cells)) for p in cells.glob("*/*/vcast_synth/DONE"))
    assert finished == ["vanilla/r1/vcast_synth", "vcast/r0.25/vcast_synth", "vcast/r0.5/vcast_synth"]
    for cell, (mtime, started) in done_before.items():
        assert (cell / DONE_FILE).stat().st_mtime_ns == mtime and read_cell(cell)["started_at"] == started
        assert f"{cell.relative_to(results)}: already finished, skipped" in output
    assert output.count(": running (attempt") == 2
    assert not list(cells.rglob(".*.staging-*")) and not list(cells.rglob(".*.old-*"))
