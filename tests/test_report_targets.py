"""Report targets: one name per table, one set of outputs per target whichever command builds it,
figures at the cells' own input, and a target without finished cells refused with how to run them."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import logging
from pathlib import Path

import pytest

from tests.support.sample_logs import Answer, answers_spec, write_answers_cell
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
                     experiment: str = "demo") -> None:
    spec = dataclasses.replace(answers_spec(experiment, "demo_qwen3vl", frames, ratio, method, SYNTH),
                               plugin="vcast_qwen3_vl", pretrained=str(pretrained), model_args=dict(PIXELS))
    answers = {"vcast_synth": [Answer(p, "A") for p in preds]}
    write_answers_cell(root, spec, SYNTH, answers, efficiency=_efficiency(64.0 * ratio))


@pytest.fixture()
def demo_tree(tmp_path: Path, tiny_dirs: dict, synth_data: Path) -> Path:
    results = tmp_path / "results"
    for method, ratio, preds in (("vanilla", 1.0, "AABA"), ("vcast", 0.25, "AABB"), ("random", 0.25, "ABBB")):
        _write_demo_cell(results, method, ratio, preds, tiny_dirs["qwen3_vl"])
    return results


def test_a_target_answers_to_its_own_name_its_underscored_name_and_its_experiment(tmp_path: Path) -> None:
    from vcast.report.__main__ import resolve_target
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

    from vcast.report.__main__ import make_target

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    listed = re.search(r"^REPORT_TABLES := (.*?)(?<!\\)\n", makefile, re.M | re.S).group(1)
    assert {make_target(p) for p in PRODUCTS.values()} - {None} == set(listed.replace("\\\n", " ").split())


def test_a_target_without_finished_cells_writes_nothing_and_says_how_to_run_them(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    results = tmp_path / "results"
    results.mkdir()
    assert main(["build", "qwen3vl_8b", "--results", str(results)]) == 1
    err = capsys.readouterr().err
    assert "refused qwen3vl-8b: no finished cell of experiment qwen3vl_8b" in err
    assert "make table-qwen3vl-8b" in err and "python -m vcast.sweep experiment=qwen3vl_8b -m" in err
    assert list(results.iterdir()) == []  # no all-dash table


def test_the_demo_target_writes_the_same_outputs_whichever_command_builds_it(
        demo_tree: Path, capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture) -> None:
    """`python -m vcast.report build demo` (the README's command) is what `make demo` runs: the
    kept-token and ± columns, the analysis and trade-off figure, the budget profile at the cells'
    frames and resolution; a build with another option names what the earlier one left."""
    caplog.set_level(logging.INFO, logger="vcast.report")
    assert main(["build", "demo", "--results", str(demo_tree), "--resamples", "200"]) == 0
    out = demo_tree / "demo"
    expected = ["budget-profiles.pdf", "budget-profiles.png", "demo-analysis.csv", "demo-analysis.md",
                "demo-analysis.tex", "demo-tradeoff.pdf", "demo-tradeoff.png", "demo.csv", "demo.md", "demo.tex"]
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == expected
    header = next(csv.reader((out / "demo.csv").open()))
    assert "KeptPct" in header and "VCastSynth_pm" in header
    # the budget profile reads the video as the cells did: their checkpoint, 8 frames, their pixel bounds
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("budget profiles:"))
    assert ", 8 frames, pixels per frame 4096..16384" in line
    assert "left from an earlier build" not in capsys.readouterr().err

    assert main(["build", "demo", "--results", str(demo_tree), "--no-analysis", "--resamples", "200"]) == 0
    left = [line for line in capsys.readouterr().err.splitlines() if line.startswith("left from an earlier build")]
    assert sorted(Path(line.rsplit(": ", 1)[1]).name for line in left) == [
        "demo-analysis.csv", "demo-analysis.md", "demo-analysis.tex", "demo-tradeoff.pdf", "demo-tradeoff.png"]


def test_figure_input_comes_from_the_most_common_finished_cells_unless_given(tmp_path: Path) -> None:
    from vcast.report.__main__ import figure_arguments
    from vcast.report.cell_geometry import cell_geometry

    results = tmp_path / "results"
    for method in ("vanilla", "vcast"):
        _write_demo_cell(results, method, 0.25, "AB", Path("/ckpt/a"), frames=16)
    _write_demo_cell(results, "random", 0.25, "AB", Path("/ckpt/b"), frames=8)
    geometry = cell_geometry(results, ("demo",), "demo_qwen3vl")
    assert (geometry.pretrained, geometry.frames, geometry.max_pixels, geometry.min_pixels, geometry.cells) == (
        "/ckpt/a", 16, 16384, 4096, 2)
    assert cell_geometry(results, ("demo",), "another_model") is None
    unset = argparse.Namespace(model_dir=None, frames=None, max_pixels=None, min_pixels=None)
    filled = figure_arguments(unset, PRODUCTS["demo"], results)
    assert (filled.model_dir, filled.frames, filled.max_pixels, filled.min_pixels) == (Path("/ckpt/a"), 16, 16384, 4096)
    given = figure_arguments(argparse.Namespace(model_dir=None, frames=32, max_pixels=None, min_pixels=None),
                             PRODUCTS["demo"], results)
    assert given.frames == 32 and given.model_dir == Path("/ckpt/a")
    # a product without cells (the budgets figure) keeps the command line's values
    assert figure_arguments(unset, PRODUCTS["budgets"], results) is unset
