"""The GPU check kit (``python -m vcast.gpucheck``, ``make gpu-check``): its CPU mode end to end,
so the kit cannot rot between GPU sessions, and the pieces that decide what it reports.

No timing is asserted: the CPU mode's numbers come from a tiny model on a shared machine."""

from __future__ import annotations

import csv
import inspect
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.support.shared_once import shared_once
import vcast
from vcast.gpucheck import PARTS, cuda_tests, efficiency, models, pipeline
from vcast.gpucheck.__main__ import GPU_BUDGET_S, gpu_settings
from vcast.gpucheck.results import OUTPUT_FILES, Budget, Report, Table, to_csv
from vcast.gpucheck.selection import token_methods
from vcast.gpucheck.smoke import compare_decodes
from vcast.families import all_archs

REPO = Path(__file__).resolve().parents[1]
# Harness-only packages the kit must not need (the lent GPU machines have none of them).
BLOCKED = ("hydra", "omegaconf", "lmms_eval", "decord", "av", "submitit", "wandb", "qwen_vl_utils")


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kit's CPU mode, run once per session across pytest-xdist workers (tests/support/shared_once.py)."""
    def run(folder: Path) -> None:
        out = folder / "kit"  # only the kit's files (shared_once marks the folder itself)
        env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
        env.pop("OUT", None)
        done = subprocess.run([sys.executable, "-m", "vcast.gpucheck", "--cpu-small", "--out", str(out)], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert "mode cpu-small" in done.stdout and "0 failed" in done.stdout

    return shared_once(tmp_path_factory, "gpu-check", run) / "kit"


@pytest.mark.slow  # the kit's CPU mode, once (slow tests of a module start apart: conftest.py)
def test_cpu_mode_writes_every_file_and_checks_every_method(cpu_run: Path) -> None:
    assert sorted(p.name for p in cpu_run.iterdir()) == sorted(OUTPUT_FILES) and len(OUTPUT_FILES) <= 8
    environment = json.loads((cpu_run / "environment.json").read_text())
    assert environment["mode"] == "cpu-small" and environment["device"] == "cpu"
    assert {"torch", "transformers", "commit", "driver", "card", "dtype"} <= set(environment)
    checks = (cpu_run / "checks.md").read_text()
    for method in vcast.available_methods():
        assert f"| smoke/qwen3_vl/{method} | pass |" in checks, method
    for arch in all_archs():  # every family's tiny checkpoint, the paper's and the others
        assert f"| smoke/{arch}/vcast | pass |" in checks, arch
        assert f"| smoke/{arch}/fewer_frames | pass |" in checks, arch
    assert "| cuda-tests | skipped | CPU mode" in checks
    assert "| memory/eager-guard | pass |" in checks and "| memory/fastv |" in checks and "| memory/pdrop |" in checks
    from transformers import Qwen3VLForConditionalGeneration

    if "mm_encoder_outputs" in inspect.signature(Qwen3VLForConditionalGeneration.forward).parameters:
        assert "equal to the reference" in checks  # the hook-free reference was compared (transformers >= 5.18)
    else:
        assert "has no mm_encoder_outputs (5.18+)" in checks


@pytest.mark.slow  # the kit's CPU mode, once (slow tests of a module start apart: conftest.py)
def test_cpu_mode_efficiency_table_has_every_method_with_finite_numbers(cpu_run: Path) -> None:
    rows = list(csv.DictReader((cpu_run / "efficiency.csv").open()))
    cells = {(r["family"], int(r["frames"]), r["method"]) for r in rows}
    expected = {("Qwen3-VL", 32, label) for label, _, _ in efficiency.QWEN_METHODS}  # the GPU mode adds 64
    expected |= {("LLaVA-OneVision", 32, label) for label, _, _ in efficiency.LLAVA_METHODS}
    others = models.other_published_models()
    expected |= {(family.display, 32, label) for family, _ in others for label, _, _ in efficiency.FAMILY_METHODS}
    assert cells == expected
    assert {r["model"] for r in rows} >= {f"{published.display} (tiny config)" for _, published in others}
    for row in rows:
        for column in ("vision_ms", "selection_ms", "prefill_ms", "ttft_ms", "decode_ms", "total_ms",
                       "peak_memory_mib", "items_per_s", "prefill_vs_vanilla", "memory_vs_vanilla",
                       "throughput_vs_vanilla"):
            assert math.isfinite(float(row[column])), (row["method"], column)
        assert int(row["runs"]) == 2 and int(row["decode_steps"]) == int(row["new_tokens"]) - 1
        kept, total = int(row["kept_tokens"]), int(row["video_tokens"])
        assert kept == total if row["registry_method"] == "vanilla" else kept < total
    for (family, frames), block in _blocks(rows).items():  # one video per block: one vision cost, less LLM work
        vanilla = next(r for r in block if r["registry_method"] == "vanilla")
        assert float(vanilla["vision_tflops"]) > 0 and float(vanilla["llm_tflops"]) > 0
        for row in block:
            assert float(row["vision_tflops"]) == float(vanilla["vision_tflops"]), (family, frames, row["method"])
            if row is not vanilla:
                assert float(row["llm_tflops"]) < float(vanilla["llm_tflops"]), (family, frames, row["method"])
    vcast_paper = next(r for r in rows if r["method"] == "vcast (paper)" and r["frames"] == "32")
    assert float(vcast_paper["paper_prefill_vs_vanilla"]) == pytest.approx(118.8 / 243.6)
    markdown = (cpu_run / "efficiency.md").read_text()
    assert "Against the paper" in markdown and "↓51.2%" in markdown and "1.16×" in markdown

    selection = list(csv.DictReader((cpu_run / "selection.csv").open()))
    assert {(int(r["frames"]), r["method"]) for r in selection} == {(f, m) for f in (32, 64, 128)
                                                                   for m in token_methods()}
    assert all(math.isfinite(float(r["prefill_saved_ms"])) for r in selection)


@pytest.mark.slow  # the kit's CPU mode, once (slow tests of a module start apart: conftest.py)
def test_cpu_mode_pipeline_table_compares_serial_and_prefetched_passes(cpu_run: Path) -> None:
    """Both methods, serial and prefetched, with the same inputs, kept tokens and (on the CPU) new
    tokens; the table ends efficiency.md."""
    rows = list(csv.DictReader((cpu_run / "pipeline.csv").open()))
    assert [(r["method"], int(r["prefetch"])) for r in rows] == [
        (label, depth) for label, _, _ in pipeline.METHODS for depth in pipeline.DEPTHS]
    for row in rows:
        assert int(row["items"]) == pipeline.CPU_CLIPS.items and int(row["frames"]) == pipeline.CPU_CLIPS.frames
        for column in ("total_s", "prepare_s", "wait_s", "model_s", "total_vs_max", "total_vs_sum", "speedup"):
            assert math.isfinite(float(row[column])) and float(row[column]) > 0, (row["method"], column)
        if int(row["prefetch"]):
            assert int(row["same_tokens_items"]) == int(row["items"])
        else:  # serial: waiting is preparing, and the pass is the sum of its parts
            assert float(row["wait_s"]) == pytest.approx(float(row["prepare_s"]))
    checks = (cpu_run / "checks.md").read_text()
    for label, _, _ in pipeline.METHODS:
        assert f"| pipeline/{label} | pass | same inputs and kept tokens;" in checks
    assert "# Where the total time goes" in (cpu_run / "efficiency.md").read_text()
    efficiency_rows = list(csv.DictReader((cpu_run / "efficiency.csv").open()))
    assert all(0 < int(r["same_tokens_runs"]) <= int(r["runs"]) for r in efficiency_rows)


def test_prefetch_comparison_notices_a_changed_input_kept_token_or_new_token() -> None:
    def passes() -> dict:
        return {"inputs": [{"input_ids": torch.arange(6), "pixel_values_videos": torch.ones(4, 3)} for _ in range(2)],
                "keeps": [[torch.tensor([0, 2])], [torch.tensor([1, 3])]], "tokens": [[5, 6], [7, 8]]}

    assert pipeline.same_items(passes(), passes()) == (True, True, 2)
    changed = passes()
    changed["inputs"][1]["pixel_values_videos"][3, 2] += 2 ** -20  # one value, below bf16's resolution
    assert pipeline.same_items(passes(), changed) == (False, True, 2)
    changed = passes()
    changed["keeps"][0] = [torch.tensor([0, 3])]
    assert pipeline.same_items(passes(), changed) == (True, False, 2)
    changed = passes()
    changed["tokens"][1] = [7, 9]
    assert pipeline.same_items(passes(), changed) == (True, True, 1)
    shorter = passes()
    del shorter["inputs"][1]
    assert pipeline.same_items(passes(), shorter)[:2] == (False, False)


def test_pipeline_part_is_skipped_naming_the_missing_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "NEEDS", {"vcast_no_such_module": "vcast-no-such-package"})
    report = Report(tmp_path, Budget(None), echo=False)
    pipeline.run(report, model=None, model_label="none", clips=pipeline.CPU_CLIPS, new_tokens=2, estimate_s=0.0)
    [check] = report.checks
    assert check.status == "skipped" and "vcast-no-such-package" in check.detail


def _blocks(rows: list[dict[str, str]]) -> dict[tuple[str, str], list[dict[str, str]]]:
    blocks: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        blocks.setdefault((row["model"], row["frames"]), []).append(row)
    return blocks


def test_the_kit_imports_no_harness_package() -> None:
    """What the lent machines lack: the kit's whole import chain runs with those modules blocked."""
    code = (
        "import sys\n"
        f"for name in {BLOCKED!r}:\n"
        "    sys.modules[name] = None\n"
        "import vcast, vcast.models\n"
        "from vcast.tiny_checkpoints import build_tiny_checkpoint\n"
        "import vcast.gpucheck.__main__, vcast.gpucheck.cuda_tests, vcast.gpucheck.efficiency, "
        "vcast.gpucheck.environment, vcast.gpucheck.memory, vcast.gpucheck.models, vcast.gpucheck.selection, "
        "vcast.gpucheck.smoke, vcast.gpucheck.pipeline\n"
        "vcast.available_methods()\n"
        "harness = sorted(m for m in sys.modules if m.startswith(('vcast.eval', 'vcast.sweep', 'vcast.vllm')))\n"
        "assert not harness, harness\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_the_real_configs_are_the_published_ones_not_transformers_defaults() -> None:
    qwen = models.model_config("qwen3_vl", "real")
    text, vision = qwen.text_config, qwen.vision_config
    assert (text.hidden_size, text.num_hidden_layers, text.num_key_value_heads, text.intermediate_size) == (
        4096, 36, 8, 12288)
    assert (vision.depth, vision.out_hidden_size, list(vision.deepstack_visual_indexes)) == (27, 4096, [8, 16, 24])
    llava = models.model_config("llava_onevision", "real")
    assert (llava.text_config.hidden_size, llava.text_config.num_hidden_layers, llava.vision_config.image_size) == (
        3584, 28, 384)
    tiny = models.model_config("qwen3_vl", "tiny")
    assert tiny.text_config.hidden_size == 64 and tiny.vision_config.out_hidden_size == 64
    qwen25 = models.model_config("qwen2_5_vl", "real")
    assert (qwen25.text_config.hidden_size, qwen25.text_config.num_hidden_layers, qwen25.vision_config.depth,
            list(qwen25.vision_config.fullatt_block_indexes)) == (3584, 28, 32, [7, 15, 23, 31])
    qwen35 = models.model_config("qwen3_5", "real")
    assert (qwen35.text_config.hidden_size, qwen35.text_config.num_hidden_layers) == (5120, 64)
    assert qwen35.text_config.layer_types[:4] == ["linear_attention"] * 3 + ["full_attention"]
    moe = models.model_config("qwen3_5_moe", "tiny")  # the tiny widths keep the experts and the layer pattern
    assert moe.text_config.num_experts == 4 and "linear_attention" in moe.text_config.layer_types
    assert moe.vision_config.out_hidden_size == moe.text_config.hidden_size


def test_prompts_have_the_real_token_counts() -> None:
    """32 frames of 448 px: 16 temporal patches of 28 x 28 patches, 196 tokens each (docs/models.md);
    LLaVA-OneVision: 32 frames of 14 x 14 pooled tokens and the newline."""
    cpu = torch.device("cpu")
    qwen = models.model_config("qwen3_vl", "real")
    inputs = models.video_inputs(qwen, 32, 448, cpu, torch.bfloat16)
    assert inputs["video_grid_thw"].tolist() == [[16, 28, 28]]
    assert inputs["pixel_values_videos"].shape == (16 * 28 * 28, 3 * 2 * 16 * 16)
    assert inputs["pixel_values_videos"].dtype == torch.bfloat16
    assert int((inputs["input_ids"] == qwen.video_token_id).sum()) == models.video_tokens(qwen, 32, 448) == 3136
    assert int((inputs["mm_token_type_ids"] == 2).sum()) == 3136
    assert int((inputs["input_ids"] == qwen.vision_start_token_id).sum()) == 16
    llava = models.model_config("llava_onevision", "real")
    inputs = models.video_inputs(llava, 32, 384, cpu, torch.bfloat16)
    assert int((inputs["input_ids"] == llava.video_token_index).sum()) == 32 * 14 * 14 + 1
    assert inputs["pixel_values_videos"].shape == (1, 32, 3, 384, 384)
    with pytest.raises(ValueError, match="384"):
        models.video_inputs(llava, 32, 448, cpu, torch.bfloat16)


def test_each_family_lays_out_the_kit_prompt_as_its_processor_does() -> None:
    """Qwen2.5-VL: one vision_start, one run of 16 x 16 x 16 tokens (28 px merged patches), its seconds
    per temporal patch; Qwen3.5: Qwen3-VL's timestamped layout; sides rounded to the merged patch."""
    cpu = torch.device("cpu")
    qwen25 = models.model_config("qwen2_5_vl", "real")
    assert models.fitting_side(qwen25, 448) == 448 and models.fitting_side(qwen25, 128) == 112
    inputs = models.video_inputs(qwen25, 32, 448, cpu, torch.bfloat16)
    video = inputs["input_ids"][0] == qwen25.video_token_id
    assert int(video.sum()) == 16 * 16 * 16 and int((inputs["input_ids"] == qwen25.vision_start_token_id).sum()) == 1
    start = int(video.nonzero()[0])
    assert bool(video[start : start + 4096].all())  # one run
    assert inputs["second_per_grid_ts"].tolist() == [1.0] and inputs["video_grid_thw"].tolist() == [[16, 32, 32]]
    assert inputs["pixel_values_videos"].shape == (16 * 32 * 32, 3 * 2 * 14 * 14)
    qwen35 = models.model_config("qwen3_5", "real")
    inputs = models.video_inputs(qwen35, 32, 448, cpu, torch.bfloat16)
    assert int((inputs["input_ids"] == qwen35.vision_start_token_id).sum()) == 16
    assert int((inputs["mm_token_type_ids"] == 2).sum()) == models.video_tokens(qwen35, 32, 448) == 3136
    with pytest.raises(ValueError, match="side of 28 px"):
        models.video_inputs(qwen25, 32, 448 + 16, cpu, torch.bfloat16)


def test_the_paper_ratios_come_from_paper_tables() -> None:
    ratios = efficiency.paper_ratios()
    assert 1 - ratios["vcast"]["prefill"] == pytest.approx(0.512, abs=5e-4)
    assert 1 - ratios["vcast"]["memory"] == pytest.approx(0.130, abs=5e-4)
    assert ratios["vcast"]["throughput"] == pytest.approx(1.16, abs=5e-3)
    assert "evs" not in ratios  # the paper's table has no EVS row


def test_a_near_tie_in_bf16_is_not_a_failure_but_in_fp32_it_is() -> None:
    ref_tokens = torch.tensor([[5, 7, 9]])
    ref_logits = torch.zeros(3, 10)
    ref_logits[0, 5] = ref_logits[1, 7] = ref_logits[2, 9] = 1.0
    ref_logits[1, 3] = 0.995  # token 3 is within bf16's rounding of token 7 at step 1
    tokens = torch.tensor([[5, 3, 1]])
    assert compare_decodes(ref_tokens, ref_logits, ref_tokens, ref_logits, torch.float32)[0]
    assert compare_decodes(tokens, ref_logits, ref_tokens, ref_logits, torch.bfloat16)[0]
    assert not compare_decodes(tokens, ref_logits, ref_tokens, ref_logits, torch.float32)[0]
    far = torch.tensor([[5, 2, 1]])  # token 2 is nowhere near the best
    assert not compare_decodes(far, ref_logits, ref_tokens, ref_logits, torch.bfloat16)[0]


def test_the_cuda_tests_are_found_by_their_marker() -> None:
    files = {path.name for path in cuda_tests.gpu_test_files()}
    assert {"test_models_generate.py", "test_select.py"} <= files
    assert "test_gpucheck.py" not in files
    closing = "4 skipped, 74 deselected in 3.50s"
    assert cuda_tests._summary(f"ssss\n=== {closing} ===\n") == closing


def test_gpu_mode_settings_fit_the_issue() -> None:
    settings = gpu_settings(torch.device("cuda"))
    assert settings.dtype == torch.bfloat16 and settings.runs >= 5 and settings.warmup >= 1
    assert settings.qwen_frames == (32, 64) and settings.qwen_side == 448 and settings.llava_frames == (32,)
    assert settings.smoke_full == all_archs() and settings.family_frames == (32,)
    assert settings.selection_frames == (32, 64, 128) and settings.budget_s == GPU_BUDGET_S < 8 * 60
    assert PARTS == ("tests", "smoke", "memory", "efficiency", "selection", "pipeline")


def test_report_writes_at_most_eight_files_even_with_nothing_measured(tmp_path: Path) -> None:
    report = Report(tmp_path / "out", Budget(None), echo=False)
    report.check("a/b", "skipped", "why | with a pipe")
    report.tables["selection"] = Table([{"x": 1.0, "y": float("nan")}, {"x": 2, "z": None}], "t\n")
    report.flush()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(OUTPUT_FILES)
    assert (tmp_path / "out" / "selection.csv").read_text() == "x,y,z\n1,,\n2,,\n"
    assert "why \\| with a pipe" in (tmp_path / "out" / "checks.md").read_text()
    assert to_csv([]) == ""
    with pytest.raises(ValueError):
        report.check("a", "maybe")
