"""The lmms-eval plugins on tiny random-weight checkpoints of the real classes, real lmms-eval, and
the synthetic benchmark's real mp4 clips."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vcast
from vcast.registry import is_input_method, is_llm_method

pytest.importorskip("lmms_eval")


ROOT = Path(__file__).resolve().parents[1]
QWEN_ARGS = {"max_num_frames": 16, "max_pixels": 16384, "min_pixels": 4096}


@pytest.fixture(scope="module")
def clip(synth_data: Path) -> str:
    """A 20..64-frame clip of the benchmark (the first item)."""
    first = json.loads((synth_data / "vcast_synth.jsonl").read_text().splitlines()[0])
    return str(synth_data / first["video"])


def _plugin(arch: str, tiny_dirs: dict, **kwargs):
    from vcast.families.llava_onevision.plugin import VCastLlavaOV
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    if arch == "llava_onevision":
        return VCastLlavaOV(pretrained=str(tiny_dirs[arch]), **{"max_num_frames": 8, **kwargs})
    return VCastQwen3VL(pretrained=str(tiny_dirs[arch]), **{**QWEN_ARGS, **kwargs})


def test_entry_point_registers_both_plugins() -> None:
    from importlib.metadata import entry_points

    from lmms_eval.models import get_model

    from vcast.families.llava_onevision.plugin import VCastLlavaOV
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    assert [ep.value for ep in entry_points(group="lmms_eval.models") if ep.name == "vcast"] == [
        "vcast.eval.manifests:manifests"]
    assert get_model("vcast_qwen3_vl") is VCastQwen3VL
    assert get_model("vcast_llava_ov") is VCastLlavaOV


def test_qwen_inputs_equal_lmms_eval_stock_wrapper(tiny_dirs: dict, clip: str) -> None:
    """Same prompt, same frames, same pixels as lmms-eval's own ``qwen3_vl`` simple wrapper."""
    from lmms_eval.models.simple.qwen3_vl import Qwen3_VL

    stock = Qwen3_VL(pretrained=str(tiny_dirs["qwen3_vl"]), device="cpu", device_map="cpu", **QWEN_ARGS)
    ours = _plugin("qwen3_vl", tiny_dirs)
    context = "Which colour was the object?\nA. red\nB. blue\nC. green\nD. yellow"
    stock.task_dict = {"t": {"test": {0: {}}}}
    expected, *_ = stock._preprocess_chunk([(context, {}, lambda doc: [clip], 0, "t", "test")])
    actual = ours._prepare([context], [[clip]]).tensors
    assert sorted(expected.keys()) == sorted(actual.keys())
    for key in expected:
        assert torch.equal(expected[key], actual[key]), key


@pytest.mark.parametrize("arch", ["qwen3_vl", "qwen3_vl_moe", "llava_onevision"])
def test_vanilla_is_the_untouched_model_and_vcast_prunes(arch: str, tiny_dirs: dict, clip: str) -> None:
    context = "How many times does it flash?\nA. 1\nB. 2\nC. 3\nD. 4"
    vanilla = _plugin(arch, tiny_dirs, method="vanilla")
    inputs = vanilla._prepare([context], [[clip]])
    answer = vanilla._generate(inputs, {"max_new_tokens": 6}, "t", [0])
    record = vanilla.efficiency.records[-1]
    assert record.video_tokens_kept == record.video_tokens_total > 0
    assert record.prompt_tokens_after == record.prompt_tokens_before == [inputs.tensors["input_ids"].shape[1]]
    vanilla.handle.detach()
    with torch.inference_mode():
        plain = vanilla.model.generate(**inputs.tensors, **vanilla._generate_kwargs({"max_new_tokens": 6}))
    assert vanilla.processor.batch_decode(plain[:, inputs.tensors["input_ids"].shape[1]:], skip_special_tokens=True,
                                          clean_up_tokenization_spaces=False) == answer

    pruned = _plugin(arch, tiny_dirs, method="vcast", ratio=0.25)
    pruned._generate(pruned._prepare([context], [[clip]]), {"max_new_tokens": 6}, "t", [0])
    record = pruned.efficiency.records[-1]
    assert record.video_tokens_kept == int(0.25 * record.video_tokens_total)
    dropped = record.video_tokens_total - record.video_tokens_kept
    assert record.prompt_tokens_after == [record.prompt_tokens_before[0] - dropped]
    assert record.prefill_s > 0 and record.decode_steps == 5


# Input methods (fewer_frames, downsample) prune nothing: tests/test_input_methods.py.
BASELINES = [name for name in vcast.available_methods() if name not in ("vanilla", "vcast") and not is_input_method(name)]


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
@pytest.mark.parametrize("method", BASELINES)
def test_every_baseline_runs_through_the_plugin(method: str, arch: str, tiny_dirs: dict, clip: str) -> None:
    """The lmms-eval entry point: each baseline compresses the benchmark clip and the log records
    what the hooks really kept (exactly floor(r * T * P) unless the method defines its count)."""
    context = "How many times does it flash?\nA. 1\nB. 2\nC. 3\nD. 4"
    # PDrop's layer-averaged 25% is unreachable on 2-3 layers (see baselines/pdrop/): give its lambda.
    params = {"lam": 0.5} if method == "pdrop" else {}
    plugin = _plugin(arch, tiny_dirs, method=method, ratio=0.25, **params)
    plugin._generate(plugin._prepare([context], [[clip]]), {"max_new_tokens": 2}, "t", [0])
    record = plugin.efficiency.records[-1]
    stats = plugin.handle.stats
    (video,) = stats.segments
    assert record.video_tokens_kept == video.kept and record.video_tokens_total == video.total
    assert record.video_tokens_final == stats.final_video_tokens and record.layer_retention == stats.layer_retention
    if is_llm_method(method):  # drops inside the LLM: fewer tokens reach the last layer than entered it
        assert stats.llm_stages and record.layer_retention < 1
        if method == "framefusion":  # its cost budget may be used up before the LLM (see its file)
            assert record.video_tokens_final <= video.kept
        else:
            assert 0 < record.video_tokens_final < video.kept
        return
    assert 0 < video.kept < video.total
    assert record.video_tokens_final == video.kept and record.layer_retention == video.kept / video.total
    if method.endswith("_2x2"):  # one token per 2x2 cell of the frame's grid
        side = round(video.tokens_per_frame**0.5) if arch == "llava_onevision" else None
        if side is not None:
            assert video.kept == video.frames * math.ceil(side / 2) ** 2
    elif method not in ("dycoke", "framefusion_merge", "flashvid_merge"):  # their own counts (see their files)
        assert video.kept == int(0.25 * video.total)


def test_plugin_passes_method_parameters_as_strings(tiny_dirs: dict, clip: str) -> None:
    """model_args arrive as strings: VisionZip + V-CAST budgeting (temporal=curvature) gives V-CAST's
    per-frame budgets, plain VisionZip equal ones."""
    context = "How many times does it flash?\nA. 1\nB. 2\nC. 3\nD. 4"
    budgets = {}
    for method, params in (("visionzip", {"temporal": "curvature"}), ("vcast", {}), ("visionzip", {})):
        plugin = _plugin("qwen3_vl", tiny_dirs, method=method, ratio=0.25, **params)
        plugin._generate(plugin._prepare([context], [[clip]]), {"max_new_tokens": 1}, "t", [0])
        budgets[(method, bool(params))] = plugin.handle.stats.segments[0].budgets
    assert budgets[("visionzip", True)] == budgets[("vcast", False)]
    assert max(budgets[("visionzip", False)]) - min(budgets[("visionzip", False)]) <= 1
    assert budgets[("visionzip", True)] != budgets[("visionzip", False)]


@pytest.mark.parametrize("args, bad", [
    ("method=nope", "nope"),
    ("method=vcast,tau=-1", "tau"),
    ("method=vcast,frobnicate=1", "frobnicate"),
    ("method=vanilla,ratio=0.5", "0.5"),
    ("method=vcast,attn_implementation=magic", "magic"),
    ("method=vcast,max_pixels=0", "max_pixels"),
])
def test_bad_model_args_name_the_bad_value(tiny_dirs: dict, args: str, bad: str) -> None:
    from lmms_eval.models import get_model

    with pytest.raises(ValueError, match=bad):
        get_model("vcast_qwen3_vl").create_from_arg_string(f"pretrained={tiny_dirs['qwen3_vl']},{args}")


@pytest.mark.slow
def test_stock_lmms_eval_cli_runs_the_plugin(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    """``lmms-eval --model vcast_llava_ov`` (lmms-eval's own CLI, our entry point, our task)."""
    command = [sys.executable, "-m", "lmms_eval", "--model", "vcast_llava_ov", "--model_args",
               f"pretrained={tiny_dirs['llava_onevision']},method=vcast,ratio=0.25,max_num_frames=8,"
               f"efficiency_dir={tmp_path / 'eff'}",
               "--tasks", "vcast_synth", "--include_path", str(ROOT / "vcast" / "eval" / "tasks"),
               "--output_path", str(tmp_path / "out"), "--log_samples", "--limit", "4", "--batch_size", "2"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads(next((tmp_path / "out").rglob("*_results.json")).read_text())
    assert set(results["results"]["vcast_synth"]) >= {"vcast_synth_acc,none"}
    assert results["n-samples"]["vcast_synth"]["effective"] == 4
    samples = next((tmp_path / "out").rglob("*_samples_vcast_synth.jsonl")).read_text().splitlines()
    assert sorted(json.loads(line)["doc_id"] for line in samples) == [0, 1, 2, 3]
    records = [json.loads(line) for line in (tmp_path / "eff" / "rank0.jsonl").read_text().splitlines()]
    assert sum(r["items"] for r in records) == 4 and all(r["items"] == 2 for r in records)
    assert results["throughput"]["avg_kept_video_tokens"] == pytest.approx(
        sum(r["video_tokens_kept"] for r in records) / 4)


def test_a_batch_across_tasks_reads_each_requests_own_video(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    """A task group batches requests of several tasks whose video folders share file names: each
    request's video comes from its own task's doc_to_visual (not the batch's first)."""
    from dataclasses import asdict

    from lmms_eval.api.instance import Instance

    from vcast.eval.efficiency import summarize

    items = [json.loads(line) for line in (synth_data / "vcast_synth.jsonl").read_text().splitlines()[:2]]
    folders = {}
    for name, item in zip(("sub_a", "sub_b"), items):  # the same file name, different clips
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "video.mp4").write_bytes((synth_data / item["video"]).read_bytes())

    def visual_of(task: str):
        return lambda doc: [str(folders[task] / doc["video"])]

    context = "How many times does it flash?\nA. 1\nB. 2\nC. 3\nD. 4"
    requests = [Instance("generate_until", (context, {"max_new_tokens": 2}, visual_of(task), 0, task, "test"), idx=0,
                         metadata={"task": task, "doc_id": 0, "repeats": 1}) for task in ("sub_a", "sub_b")]
    kept = {}
    for batch_size, chunk in ((1, [[r] for r in requests]), (2, [requests])):
        plugin = _plugin("qwen3_vl", tiny_dirs, method="vcast", ratio=0.25, batch_size=batch_size)
        plugin.task_dict = {task: {"test": [{"video": "video.mp4"}]} for task in folders}
        for group in chunk:
            plugin.generate_until(group)
            kept.setdefault(batch_size, []).extend(s.keep.tolist() for s in plugin.handle.stats.segments)
        if batch_size == 2:
            record = plugin.efficiency.records[-1]
            assert record.task == "sub_a,sub_b" and sorted(record.tasks) == ["sub_a", "sub_b"]
            summary = summarize([asdict(record)], wall_s=1.0)  # doc 0 of each task: two items, not one
            assert summary["items"] == 2
            assert {task: entry["items"] for task, entry in summary["per_task"].items()} == {"sub_a": 1, "sub_b": 1}
            assert summary["per_task"]["sub_a"]["prefill_latency_s"] == pytest.approx(record.prefill_s / 2)
    assert kept[1][0] != kept[1][1]  # the two clips differ, so a mix-up would show
    assert sorted(kept[2]) == sorted(kept[1])


def test_unreadable_videos_are_answered_empty_and_recorded(tiny_dirs: dict, clip: str, tmp_path: Path) -> None:
    """MVBench-style: doc_to_visual returns a path that does not exist, or a file that is not a
    video. In one batch with a good clip, those two are recorded and answered empty, the good one
    is generated; with ``missing_visuals=fail`` the first one raises."""
    from lmms_eval.api.instance import Instance

    from vcast.eval.video import MissingVideo

    (tmp_path / "broken.mp4").write_bytes(b"\x00 not a video")
    paths = {0: clip, 1: str(tmp_path / "gone.mp4"), 2: str(tmp_path / "broken.mp4")}
    context = "How many times does it flash?\nA. 1\nB. 2\nC. 3\nD. 4"
    requests = [Instance("generate_until", (context, {"max_new_tokens": 2}, lambda doc: [doc["path"]], i, "mv", "test"),
                         idx=0, metadata={"task": "mv", "doc_id": i, "repeats": 1}) for i in paths]
    plugin = _plugin("qwen3_vl", tiny_dirs, method="vcast", ratio=0.25, batch_size=3, efficiency_dir=str(tmp_path / "eff"))
    plugin.task_dict = {"mv": {"test": [{"path": paths[i]} for i in paths]}}
    answers = plugin.generate_until(requests)
    assert answers[1] == answers[2] == "" and plugin.efficiency.records[-1].doc_ids == [0]
    from vcast.eval.missing_visuals import read_missing

    recorded = read_missing(tmp_path / "eff")
    assert [(item["doc_id"], item["error"].split(":")[0]) for item in recorded] == [
        (1, "MissingVideo"), (2, "UndecodableVideo")]
    strict = _plugin("qwen3_vl", tiny_dirs, method="vcast", ratio=0.25, missing_visuals="fail")
    strict.task_dict = plugin.task_dict
    with pytest.raises(MissingVideo, match="gone.mp4"):
        strict.generate_until(requests[1:2])
    with pytest.raises(ValueError, match="missing_visuals"):
        _plugin("qwen3_vl", tiny_dirs, missing_visuals="maybe")


def test_stop_strings_follow_the_qwen_wrapper() -> None:
    """The task's ``until`` (popped), the end-of-text default, "\\n\\n" dropped; answers cut at each stop."""
    from vcast.eval.plugin import cut_at_stops, stop_strings

    kwargs = {"until": ["\n\n", "Q:"], "max_new_tokens": 4}
    assert stop_strings(kwargs, "<eos>") == ["Q:"] and kwargs == {"max_new_tokens": 4}
    assert stop_strings({}, "<eos>") == ["<eos>"] and stop_strings({"until": "X"}, "<eos>") == ["X"]
    with pytest.raises(ValueError, match="must be a string or a list, got dict"):
        stop_strings({"until": {"a": 1}}, "<eos>")
    assert cut_at_stops("A. yes Q: next<eos>", ["Q:", "<eos>"]) == "A. yes " and cut_at_stops("B", ["", "C"]) == "B"
