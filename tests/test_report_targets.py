"""Report targets: one name per table, one set of outputs per target whichever command builds it,
figures at the cells' own input, and a target without finished cells refused with how to run them."""

from __future__ import annotations

import csv
import dataclasses
import logging
from pathlib import Path

import numpy as np
import pytest

from tests.support.sample_logs import Answer, answers_spec, write_answers_cell
from vcast.kept_records import Geometry, KeptRecord, append_records, rank_file
from vcast.results.tree import Cell
from vcast.report.__main__ import main
from vcast.report.products import PRODUCTS
from vcast.report.scoring import load_task_scorings

SYNTH = load_task_scorings()["vcast_synth"]
PIXELS = {"max_pixels": 16384, "min_pixels": 4096}


def _efficiency(kept: float) -> dict:
    """A cell's efficiency record as the plugin writes it (CPU: process memory)."""
    return {"items": 4, "calls": 4, "prefill_latency_s": 0.01, "selection_latency_s": 0.001,
            "generation_latency_s": 0.02, "total_latency_s": 1.0, "throughput_items_per_s": 4.0,
            "peak_memory_mb": 1200.0, "memory_source": "process_peak_rss", "mean_video_tokens_total": 64.0,
            "mean_video_tokens_kept": kept, "mean_video_tokens_final": kept, "layer_retention": kept / 64.0}


def _write_demo_cell(root: Path, method: str, ratio: float, preds: str, pretrained: Path, frames: int = 8,
                     experiment: str = "demo") -> Path:
    """A finished demo cell, with a kept-token record per item (8 x 2 x 2 grids, 16 frames of a
    64 px video; the kept tokens are the first ``ratio`` share of each item's, so every method's
    budgets differ by item)."""
    spec = dataclasses.replace(answers_spec(experiment, "demo_qwen3vl", frames, ratio, method, SYNTH),
                               plugin="vcast_qwen3_vl", pretrained=str(pretrained), model_args=dict(PIXELS))
    answers = {"vcast_synth": [Answer(p, "A") for p in preds]}
    cell = write_answers_cell(root, spec, SYNTH, answers, efficiency=_efficiency(64.0 * ratio))
    geometry = Geometry("qwen3_vl", (frames // 2, 2, 2), 2, (64, 64))
    records = []
    for doc in range(len(preds)):
        order = np.random.default_rng([doc, len(method)]).permutation(geometry.tokens)
        kept = np.zeros(geometry.tokens, dtype=bool)
        kept[order[: round(ratio * geometry.tokens)]] = True
        kept = kept.reshape(geometry.grid)
        records.append(KeptRecord("vcast_synth", doc, 0, method, geometry, list(range(frames)),
                                  [int(k) for k in kept.reshape(geometry.grid[0], -1).sum(1)], kept))
    append_records(rank_file(cell, 0), records)
    return cell


@pytest.fixture()
def demo_tree(tmp_path: Path, tiny_dirs: dict, synth_data: Path) -> Path:
    results = tmp_path / "results"
    for method, ratio, preds in (("vanilla", 1.0, "AABA"), ("vcast", 0.25, "AABB"), ("vcast_uniform", 0.25, "ABAB"),
                                 ("random", 0.25, "ABBB")):
        _write_demo_cell(results, method, ratio, preds, tiny_dirs["qwen3_vl"])
    return results


def test_a_target_answers_to_its_own_name_its_underscored_name_and_its_experiment(tmp_path: Path) -> None:
    from vcast.report.build_target import resolve_target
    from vcast.report.products import find_product

    assert find_product("qwen3vl-8b") is find_product("qwen3vl_8b") is PRODUCTS["qwen3vl-8b"]
    assert find_product("llava_ov") is find_product("llava_ov_7b") is PRODUCTS["llava-ov-7b"]
    assert find_product("ablation_spatial") is PRODUCTS["ablations"]
    assert resolve_target("efficiency", tmp_path) is PRODUCTS["efficiency"]
    assert find_product("adhoc") is None
    with pytest.raises(ValueError, match="neither a report target"):
        resolve_target("adhoc", tmp_path)


def test_the_make_targets_named_are_the_makefiles_table_targets() -> None:
    import re

    from vcast.report.build_target import make_target

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    listed = re.search(r"^REPORT_TABLES := (.*?)(?<!\\)\n", makefile, re.M | re.S).group(1)
    assert {make_target(p) for p in PRODUCTS.values()} - {None} == set(listed.replace("\\\n", " ").split())


def test_a_target_without_finished_cells_writes_nothing_and_says_how_to_run_them(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The advice moves forward: what keeps the cells from running here first (the checkpoint and the
    four benchmarks' data), then the sweep that runs them, never the make target just run; another
    experiment's cells are not its business."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    results = tmp_path / "results"
    other = results / "adhoc" / "m" / "8f" / "vanilla" / "r1" / "t"
    other.mkdir(parents=True)
    (other / "cell.json").write_text("{not json")  # an unrelated broken cell: no warning about it here
    assert main(["build", "qwen3vl_8b", "--results", str(results)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("refused qwen3vl-8b: no finished cell of experiment qwen3vl_8b")
    assert lines[1] == "Its cells cannot run on this machine yet (pre-flight of experiment qwen3vl_8b):"
    problems = [line for line in lines if line.startswith("  - ")]
    assert "pretrained 'Qwen/Qwen3-VL-8B-Instruct'" in problems[0]
    assert [task for task in ("mvbench", "longvideobench", "mlvu", "videomme")
            if any(f"task '{task}': data not found" in line for line in problems)] == [
        "mvbench", "longvideobench", "mlvu", "videomme"]
    advice = lines[-1]
    assert advice.startswith(f"Run its cells once those are fixed: python -m vcast.sweep experiment=qwen3vl_8b "
                             f"results_root={results} -m")
    assert advice.endswith(f"then rebuild: make table-qwen3vl-8b REPORT_ONLY=1 RESULTS={results}")
    assert "adhoc" not in "\n".join(lines)
    assert sorted(p.name for p in results.iterdir()) == ["adhoc"]  # no all-dash table


def test_the_demo_target_writes_the_same_outputs_whichever_command_builds_it(
        demo_tree: Path, capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture) -> None:
    """`python -m vcast.report build demo` (the README's command) is what `make demo` runs: the
    kept-token and ± columns, the analysis and trade-off figure, the budget profile at the cells'
    frames and resolution; a build with another option names what the earlier one left."""
    caplog.set_level(logging.INFO, logger="vcast.report")
    assert main(["build", "demo", "--results", str(demo_tree), "--resamples", "200"]) == 0
    out = demo_tree / "demo"
    expected = ["budget-profiles.pdf", "budget-profiles.png", "demo-analysis.csv", "demo-analysis.md",
                "demo-analysis.tex", "demo-summary.csv", "demo-summary.md", "demo-tradeoff.pdf", "demo-tradeoff.png",
                "demo.csv", "demo.md", "demo.tex"]
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == expected
    header = next(csv.reader((out / "demo.csv").open()))
    assert "KeptPct" in header and "VCastSynth_pm" in header
    # the budget profile draws the cells' recorded budgets; the budget analysis has no VisionZip, FastVID,
    # HoliTom or VidCom² cell here, so it is not drawn and the build says why
    err = capsys.readouterr().err
    assert "left from an earlier build" not in err
    assert "skipped: figure budget-analysis: budget-analysis needs kept-token records of at least two" in err

    assert main(["build", "demo", "--results", str(demo_tree), "--no-analysis", "--resamples", "200"]) == 0
    left = [line for line in capsys.readouterr().err.splitlines() if line.startswith("left from an earlier build")]
    assert sorted(Path(line.rsplit(": ", 1)[1]).name for line in left) == [
        "demo-analysis.csv", "demo-analysis.md", "demo-analysis.tex", "demo-summary.csv", "demo-summary.md",
        "demo-tradeoff.pdf", "demo-tradeoff.png"]


def test_budget_figures_read_the_cells_at_the_most_common_frames_unless_given(tmp_path: Path) -> None:
    from vcast.report.collect import collect
    from vcast.report.recorded_budgets import recorded_panels

    results = tmp_path / "results"
    cells = {method: _write_demo_cell(results, method, 0.25, "AB", Path("/ckpt/a"), frames=16)
             for method in ("vcast", "vcast_uniform", "vcast_uniqueness")}
    _write_demo_cell(results, "vcast", 0.25, "AB", Path("/ckpt/a"), frames=8)
    _write_demo_cell(results, "vcast_uniform", 0.25, "AB", Path("/ckpt/a"), frames=8)
    frame = collect(results).frame
    panels, group = recorded_panels(frame, results, "budget-profiles", ratio=0.25, experiments=["demo"])
    assert group == 2 and [title for title, _ in panels] == [
        "vcast_synth #0: 8 temporal patches \u00d7 4 tokens", "vcast_synth #1: 8 temporal patches \u00d7 4 tokens"]
    for _, profiles in panels:
        assert list(profiles) == ["uniform", "uniqueness", "curvature"]
    doc0 = dict(panels[0][1])
    assert list(doc0["curvature"]) == Cell(cells["vcast"]).kept()[("vcast_synth", 0, 0)].budgets
    eight, _ = recorded_panels(frame, results, "budget-profiles", ratio=0.25, frames=8)
    assert [list(p) for _, p in eight] == [["uniform", "curvature"]] * 2
    with pytest.raises(ValueError, match="no finished cell"):
        recorded_panels(frame, results, "budget-profiles", ratio=0.5)
