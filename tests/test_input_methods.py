"""Input methods (fewer_frames, downsample): their plans, their refusals where nothing is selected,
and the lmms-eval plugins and the sweep, which give the processor the smaller input and record
what it cost against the unpruned model."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import vcast
from vcast.input_methods import InputPlan
from vcast.registry import is_input_method, is_token_method

CONTEXT = "How many times does it flash?\nA. 1\nB. 2\nC. 3\nD. 4"
QWEN_ARGS = {"max_num_frames": 16, "max_pixels": 16384, "min_pixels": 4096}

# (ratio, frames the unpruned model reads, temporal patch) -> frames read, worked by hand.
FRAME_CASES = [((0.25, 16, 2), 4), ((0.15, 16, 2), 2), ((0.35, 16, 2), 4), ((0.35, 64, 2), 22),
               ((0.05, 16, 2), 2), ((0.25, 8, 1), 2), ((0.05, 8, 1), 1), ((0.29, 100, 1), 29), ((1.0, 32, 2), 32)]
# (ratio, grid) -> grid, by hand: 14 sqrt(.25) = 7; 14 sqrt(.15) = 5.42; 14 sqrt(.35) = 8.28; 20 sqrt(.49) = 14.
GRID_CASES = [((0.25, (14, 14)), (7, 7)), ((0.15, (14, 14)), (5, 5)), ((0.35, (14, 14)), (8, 8)),
              ((0.25, (4, 6)), (2, 3)), ((0.49, (20, 10)), (14, 7)), ((0.01, (3, 3)), (1, 1))]


def test_both_are_input_methods_and_nothing_else_is() -> None:
    inputs = {name for name in vcast.available_methods() if is_input_method(name)}
    assert inputs == {"fewer_frames", "downsample"}
    assert not any(is_token_method(name) for name in inputs) and is_token_method("evs")


@pytest.mark.parametrize("case, expected", FRAME_CASES)
def test_fewer_frames_reads_floor_r_f_frames_in_whole_patches(case: tuple, expected: int) -> None:
    ratio, reference, patch = case
    plan = vcast.input_plan("fewer_frames", ratio)
    assert plan.frames(reference, temporal_patch=patch) == expected
    assert plan.grid(14, 14) == (14, 14)


@pytest.mark.parametrize("case, expected", GRID_CASES)
def test_downsample_scales_each_side_by_the_root_of_r(case: tuple, expected: tuple) -> None:
    ratio, grid = case
    plan = vcast.input_plan("downsample", ratio)
    assert plan.grid(*grid) == expected
    assert plan.frames(16, temporal_patch=2) == 16


@given(st.sampled_from([0.05, 0.1, 0.15, 0.2, 0.25, 0.29, 0.35, 0.5, 0.7, 0.99]), st.integers(1, 60), st.integers(1, 60))
def test_the_grid_is_the_largest_that_fits_exactly(ratio: float, height: int, width: int) -> None:
    """Each side is floor(s sqrt r), compared in exact arithmetic: s'^2 <= r s^2 < (s' + 1)^2 (or 1)."""
    share = Fraction(repr(ratio))
    for side, new in zip((height, width), InputPlan("x", ratio, grid_share=ratio).grid(height, width)):
        assert new == 1 or new * new <= share * side * side
        assert (new + 1) ** 2 > share * side * side


@given(st.sampled_from([0.05, 0.15, 0.25, 0.35, 0.5]), st.integers(1, 128), st.sampled_from([1, 2]))
def test_frames_never_exceed_the_budget_but_keep_one_patch(ratio: float, patches: int, patch: int) -> None:
    reference = patches * patch
    frames = InputPlan("x", ratio, frame_share=ratio).frames(reference, patch)
    assert frames % patch == 0 and frames >= patch
    assert frames == patch or frames <= Fraction(repr(ratio)) * reference


def test_select_attach_and_a_bad_name_are_refused_by_name(tiny_dirs: dict) -> None:
    from transformers import AutoModelForImageTextToText

    with pytest.raises(ValueError, match="spends the budget on the model's input.*vcast.input_plan"):
        vcast.select(torch.randn(4, 9, 8), 0.25, method="fewer_frames")
    model = AutoModelForImageTextToText.from_pretrained(str(tiny_dirs["qwen3_vl"]))
    with pytest.raises(ValueError, match="downsample.*attach method='vanilla'"):
        vcast.models.attach(model, method="downsample", ratio=0.25)
    with pytest.raises(ValueError, match="'evs' is not an input method; input methods: downsample, fewer_frames"):
        vcast.input_plan("evs", 0.25)
    with pytest.raises(ValueError, match="ratio must be in"):
        vcast.input_plan("fewer_frames", 1.5)


def _plugin(arch: str, tiny_dirs: dict, **kwargs):
    from vcast.families.llava_onevision.plugin import VCastLlavaOV
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    if arch == "llava_onevision":
        return VCastLlavaOV(pretrained=str(tiny_dirs[arch]), **{"max_num_frames": 8, **kwargs})
    return VCastQwen3VL(pretrained=str(tiny_dirs[arch]), **{**QWEN_ARGS, **kwargs})


@pytest.fixture(scope="module")
def clip(synth_data: Path) -> str:
    first = json.loads((synth_data / "vcast_synth.jsonl").read_text().splitlines()[0])
    return str(synth_data / first["video"])


def _run(plugin, clip: str):
    inputs = plugin._prepare([CONTEXT], [[clip]])
    plugin._generate(inputs, {"max_new_tokens": 2}, ["t"], [0])
    return inputs.tensors, plugin.efficiency.records[-1]


@pytest.mark.slow
def test_qwen_plugin_reads_fewer_frames_or_smaller_frames_and_records_the_cost(tiny_dirs: dict, clip: str) -> None:
    """Against vanilla on the same clip: fewer_frames reads a quarter of the temporal patches at the
    same per-frame grid; downsample keeps every patch at a quarter of the grid; both run unpruned and
    record the unpruned model's tokens as the total, so kept / total is the budget they spent."""
    vanilla_inputs, vanilla = _run(_plugin("qwen3_vl", tiny_dirs, method="vanilla"), clip)
    (patches, height, width), = vanilla_inputs["video_grid_thw"].tolist()
    grid = (height // 2, width // 2)  # LLM tokens: 2x2 patches each
    fewer_inputs, fewer = _run(_plugin("qwen3_vl", tiny_dirs, method="fewer_frames", ratio=0.25), clip)
    assert fewer_inputs["video_grid_thw"].tolist() == [[patches // 4, height, width]]
    assert fewer.input_budget == [{"frames": 2 * patches // 4, "reference_frames": 2 * patches, "grid": list(grid),
                                   "reference_grid": list(grid)}]
    small_inputs, small = _run(_plugin("qwen3_vl", tiny_dirs, method="downsample", ratio=0.25), clip)
    assert small_inputs["video_grid_thw"].tolist() == [[patches, height // 2, width // 2]]
    assert small.input_budget[0]["grid"] == [grid[0] // 2, grid[1] // 2]
    for record in (fewer, small):
        assert record.video_tokens_total == vanilla.video_tokens_total
        assert record.video_tokens_kept == vanilla.video_tokens_total // 4
        assert record.layer_retention == 0.25 and record.video_tokens_final == record.video_tokens_kept
        assert record.prompt_tokens_before[0] < vanilla.prompt_tokens_before[0]  # the prompt itself is shorter
    assert vanilla.input_budget is None


@pytest.mark.slow
def test_fewer_frames_spreads_its_frames_over_the_whole_video(tiny_dirs: dict, clip: str) -> None:
    from vcast.eval.video import open_video

    plugin = _plugin("qwen3_vl", tiny_dirs, method="fewer_frames", ratio=0.25)
    decoded, frames, budget = plugin._read_video(clip)
    total = open_video(clip).total
    assert decoded.indices == torch.linspace(0, total - 1, budget["frames"]).round().long().tolist()
    assert decoded.indices[0] == 0 and decoded.indices[-1] == total - 1
    assert frames.shape[0] == budget["frames"]


@pytest.mark.slow
def test_llava_plugin_reads_fewer_frames_and_refuses_downsample(tiny_dirs: dict, clip: str) -> None:
    inputs, record = _run(_plugin("llava_onevision", tiny_dirs, method="fewer_frames", ratio=0.25), clip)
    assert inputs["pixel_values_videos"].shape[1] == 2  # 8 frames -> 2
    assert record.input_budget == [{"frames": 2, "reference_frames": 8, "grid": None, "reference_grid": None}]
    assert record.video_tokens_kept * 4 == record.video_tokens_total
    with pytest.raises(ValueError, match="vcast_llava_ov: method 'downsample' lowers the frame resolution.*384x384"):
        _plugin("llava_onevision", tiny_dirs, method="downsample", ratio=0.25)


def test_sweep_preflight_refuses_downsample_on_llava_only() -> None:
    from vcast.sweep.cell import CellSpec
    from vcast.sweep.spec import preflight

    def spec(plugin: str) -> CellSpec:
        return CellSpec(experiment="t", model="m", plugin=plugin, pretrained="p", prompt_key="k", model_args={},
                        method="downsample", method_id="downsample", method_params={}, ratio=0.25, frames=8,
                        task="vcast_synth", lmms_tasks=["vcast_synth"])

    assert preflight(spec("vcast_qwen3_vl")) is None
    assert "384x384" in preflight(spec("vcast_llava_ov"))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fewer_frames", "downsample", "evs"])
def test_sweep_cell_through_lmms_eval_records_the_spent_share(method: str, tiny_dirs: dict, synth_data: Path,
                                                               tmp_path: Path) -> None:
    from tests.test_sweep import tiny_spec
    from vcast.sweep.execute import run_cell

    record = run_cell(tiny_spec(tiny_dirs, method=method), tmp_path)
    assert record.status == "ok", record.log_tail
    efficiency = record.efficiency
    share = efficiency.mean_video_tokens_kept / efficiency.mean_video_tokens_total
    assert share == pytest.approx(0.25, abs=0.01) and math.isclose(efficiency.layer_retention, share)
