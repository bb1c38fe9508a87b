"""vLLM with the vcast plugin equals Hugging Face + ``vcast.models.attach`` (CPU, float32).

Runs in the vLLM environment (``make setup-vllm && make test-vllm``); skipped elsewhere. Both
sides run in that one process on the same checkpoint (the tiny Qwen3-VL with text head_dim 32,
which vLLM's CPU attention accepts), the same prompt and the same mp4-free clip through the same
transformers processor: vLLM pins transformers < 5.20, which vcast's HF path supports, so the
reference needs no second environment. vLLM's defaults (chunked prefill and prefix caching on; each
prompt here fits one prefill step: tests/test_vllm_chunked.py splits them).

Checked per method (dense; V-CAST on the MoE class too): the kept indices vLLM's model computed equal ``vcast.select`` on the HF
vision tower's tokens of the same video (and those tokens agree), and the greedy tokens vLLM
generates equal HF's with the method attached (which differ from HF's unpruned ones, so a
plugin that did not prune, or misplaced positions, fails). The kept-token record built from the
model's stats (the video's key carried through vLLM's processor and model, :mod:`vcast.vllm.kept`)
equals the one the Hugging Face plugins build from ``attach``'s stats (``call_records``).

Then the ``vcast_vllm`` lmms-eval plugin end to end (where lmms-eval is installed in this
environment: ``make setup-vllm-eval``; skipped otherwise): a cell on the synthetic benchmark
writes one kept-token record per item, each equal to the ``vcast_qwen3_vl`` cell's record of the
same item on the same checkpoint, and none with ``record_kept=false``; and a ``vcast.eval.run``
killed inside its response cache's write resumes from the answers it kept (:mod:`vcast.eval.resume`).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed in this environment: make setup-vllm, then "
                                           "make test-vllm runs this test with .venv-vllm's python")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tests.model_inputs import QWEN_VIDEO_SIZE, clip  # noqa: E402
from tests.support.vllm_case import (  # noqa: E402
    FRAMES,
    NEW_TOKENS,
    RATIO,
    SIDE,
    chat_text,
    hf_generate,
    hf_video_inputs,
    vllm_metadata,
)
from vcast.kept_records import call_records, merged_grid_geometry  # noqa: E402
from vcast.vllm.kept import NO_KEY, VIDEO_KEY, KeptVideo, records_from_stats  # noqa: E402

from vllm.platforms import current_platform  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not current_platform.is_cpu(), reason="the equality test is defined on vLLM's CPU "
                                 "build (float32 on both sides); this vLLM is a GPU build")]

QUESTION = "What moves in this video?"
METHODS = ("vcast", "uniform", "random", "dycoke", "vidcom2", "evs")
KEY = 7  # the clip's VIDEO_KEY (the plugin numbers its videos from 0)


@pytest.fixture(scope="module")
def prompt(vllm_checkpoint):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(vllm_checkpoint)
    return processor, chat_text(processor, QUESTION)


@pytest.fixture(scope="module")
def hf(vllm_checkpoint, prompt):
    """The HF model, its processor inputs for the clip, and the main post-merger video tokens [T, P, D]."""
    import transformers

    processor, text = prompt
    inputs = hf_video_inputs(processor, text, [0])
    model = transformers.Qwen3VLForConditionalGeneration.from_pretrained(vllm_checkpoint, dtype=torch.float32).eval()
    with torch.inference_mode():
        encoded = model.model.get_video_features(pixel_values_videos=inputs["pixel_values_videos"],
                                                 video_grid_thw=inputs["video_grid_thw"])
    t, h, w = inputs["video_grid_thw"][0].tolist()
    merge = model.config.vision_config.spatial_merge_size
    frames = encoded.pooler_output[0].reshape(t, (h // merge) * (w // merge), -1)
    return model, inputs, frames


def vllm_run(checkpoint, text: str, method: str) -> tuple[list[int], list[dict], list[dict]]:
    """Generated token ids, the model's records (kept indices, main tokens) and its drained stats
    of one request; a pruned run sends the clip with :data:`KEY` in its metadata, as the plugin does."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the model in this process, for apply_model
    from vllm import LLM, SamplingParams

    import vcast.vllm

    llm = LLM(model=str(checkpoint), dtype="float32", seed=0, max_model_len=1024, enforce_eager=True,
              gpu_memory_utilization=0.1, kv_cache_memory_bytes=64 * 2**20,
              limit_mm_per_prompt={"video": 1, "image": 0}, mm_processor_kwargs={"size": QWEN_VIDEO_SIZE},
              **vcast.vllm.engine_kwargs(str(checkpoint), method, RATIO))
    try:
        if method != "vanilla":
            llm.apply_model(lambda model: setattr(model, "vcast_record", True))
        metadata = vllm_metadata(**({} if method == "vanilla" else {VIDEO_KEY: KEY}))
        request = {"prompt": text, "multi_modal_data": {"video": [(clip(FRAMES, SIDE, seed=0), metadata)]}}
        outputs = llm.generate(request, SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS))
        records = [] if method == "vanilla" else llm.apply_model(lambda model: list(model.vcast_records))[0]
        stats = [] if method == "vanilla" else llm.apply_model(lambda model: model.vcast_drain_stats())[0]
        return list(outputs[0].outputs[0].token_ids), records, stats
    finally:
        del llm
        gc.collect()


@pytest.mark.parametrize("method", METHODS)
def test_vllm_plugin_equals_hf_attach(vllm_checkpoint, prompt, hf, method: str) -> None:
    import vcast

    model, inputs, frames = hf
    _, text = prompt
    generated, records, stats = vllm_run(vllm_checkpoint, text, method)

    assert len(records) == 1, f"vLLM's model pruned {len(records)} videos, expected 1"
    record = records[0]
    assert record["grid_thw"] == tuple(inputs["video_grid_thw"][0].tolist())
    torch.testing.assert_close(record["frames"], frames.float(), rtol=1e-4, atol=1e-4)
    expected_keep = vcast.select(frames, RATIO, method).keep
    assert record["keep"].tolist() == expected_keep.tolist()
    assert 0 < expected_keep.numel() < frames.shape[0] * frames.shape[1]

    reference, hf_stats = hf_generate(model, inputs, method, with_stats=True)
    assert generated == reference, f"{method}: vLLM generated {generated}, HF + attach {reference}"
    # The check has teeth: pruning changes this model's answer.
    assert reference != hf_generate(model, inputs, "vanilla")

    # The kept-token record: the model's stats under the clip's key (the profiling run's, if any,
    # carry no key) make the same record as the HF plugins make from attach's stats.
    assert [stat["key"] for stat in stats if stat["key"] != NO_KEY] == [KEY]
    geometry = merged_grid_geometry("qwen3_vl", inputs["video_grid_thw"][0].tolist(), 16, 2, 2)
    (ours,) = records_from_stats([KeptVideo(KEY, "clip", 0, 0, geometry, list(range(FRAMES)))], stats, method)
    (theirs,) = call_records(hf_stats, method, [geometry], [list(range(FRAMES))], ["clip"], [0])
    assert ours.geometry == theirs.geometry and ours.frame_indices == theirs.frame_indices
    assert np.array_equal(ours.kept, theirs.kept), f"{method}: vLLM's kept mask differs from HF's"
    assert ours.budgets == theirs.budgets == ours.kept.sum(axis=(1, 2)).tolist()
    assert int(ours.kept.sum()) == expected_keep.numel()


def test_vllm_plugin_equals_hf_attach_moe(tmp_path, prompt) -> None:
    """The MoE class: V-CAST's answer through vLLM equals HF's (the MoE tiny, experts saved in the
    released layout vLLM loads)."""
    import transformers

    from vcast.vllm.tiny_checkpoints import build_vllm_checkpoint

    checkpoint = build_vllm_checkpoint("qwen3_vl_moe", tmp_path / "qwen3_vl_moe", seed=0)
    processor, text = prompt  # the MoE tiny shares the dense one's tokenizer and processor
    inputs = hf_video_inputs(processor, text, [0])
    model = transformers.Qwen3VLMoeForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.float32).eval()
    generated, records, _ = vllm_run(checkpoint, text, "vcast")
    assert len(records) == 1 and records[0]["keep"].numel() > 0
    reference = hf_generate(model, inputs, "vcast")
    assert generated == reference, f"MoE: vLLM generated {generated}, HF + attach {reference}"
    assert reference != hf_generate(model, inputs, "vanilla")


def test_vllm_vanilla_equals_hf(vllm_checkpoint, prompt, hf) -> None:
    """The stock model (no plugin settings) on the same inputs: the baseline the plugin builds on."""
    model, inputs, _ = hf
    generated, _, _ = vllm_run(vllm_checkpoint, prompt[1], "vanilla")
    assert generated == hf_generate(model, inputs, "vanilla")


def test_another_vllm_version_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, vllm_checkpoint) -> None:
    import vcast.vllm

    monkeypatch.setattr(vllm, "__version__", "0.31.0")
    with pytest.raises(RuntimeError, match=r"vLLM 0\.32\.0 .*but vLLM 0\.31\.0 is installed"):
        vcast.vllm.engine_kwargs(str(vllm_checkpoint), "vcast", RATIO)


# The lmms-eval plugin: kept-token records of a cell ------------------------------------------------

LIMIT = 4  # items per cell; the vLLM cells hand vLLM 2 requests per call, so keys, not order, match them
SYNTH_ARGS = {"max_pixels": 16384, "min_pixels": 4096}  # 128 x 128 frames: a 4 x 4 x 4 grid at 8 frames
VLLM_ARGS = {**SYNTH_ARGS, "max_model_len": 4096, "gpu_memory_utilization": 0.2,
             "kv_cache_memory_bytes": 256 * 2**20, "enforce_eager": True}


@pytest.fixture(scope="module")
def lmms_eval_env() -> None:
    pytest.importorskip("lmms_eval", reason="lmms-eval is not installed in this vLLM environment: make "
                                            "setup-vllm-eval installs it (and the rest of vcast's eval extra)")


def _cell_spec(checkpoint, plugin: str, method: str, limit: int = LIMIT, batch_size: int = 1, **model_args):
    from vcast.sweep.cell import CellSpec

    vllm_plugin = plugin == "vcast_vllm"
    return CellSpec(
        experiment="kept_vllm", model="tiny_qwen3vl_vllm" if vllm_plugin else "tiny_qwen3vl_hf", plugin=plugin,
        pretrained=str(checkpoint), prompt_key="qwen3_vl",
        model_args={**(VLLM_ARGS if vllm_plugin else {**SYNTH_ARGS, "dtype": "float32"}), **model_args},
        method=method, method_id=method, method_params={}, ratio=RATIO, frames=FRAMES, task="vcast_synth",
        lmms_tasks=["vcast_synth"], limit=limit, batch_size=batch_size)


def _run_cell(spec, root):
    from vcast.sweep.execute import run_cell

    record = run_cell(spec, root, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert record.status == "ok", record.log_tail
    return root / spec.relative_dir


def _check_records(cell, synth_data, method: str, limit: int) -> dict:
    """One record per item, each a Qwen3-VL grid with budgets the mask's counts per step and the
    frames the plugin read; the kept tokens add up to the efficiency records'."""
    import json

    from vcast.eval.video import read_qwen_video
    from vcast.results.tree import Cell

    records = Cell(cell).kept()
    assert sorted(records) == [("vcast_synth", doc_id, 0) for doc_id in range(limit)]
    calls = Cell(cell).efficiency()
    assert sum(call["video_tokens_kept"] for call in calls) == sum(int(r.kept.sum()) for r in records.values())
    assert sum(call["video_tokens_total"] for call in calls) == sum(r.kept.size for r in records.values())
    lines = (synth_data / "vcast_synth.jsonl").read_text().splitlines()
    for (_, doc_id, _), record in records.items():
        assert record.method == method and not record.stages and not record.merged
        assert record.geometry.family == "qwen3_vl" and record.geometry.frames_per_step == 2
        t, h, w = record.geometry.grid
        assert t == FRAMES // 2 and record.geometry.frame_size == (h * 32, w * 32)
        assert record.kept.sum(axis=(1, 2)).tolist() == record.budgets
        path = str(synth_data / json.loads(lines[doc_id])["video"])
        assert record.frame_indices == read_qwen_video(path, FRAMES).indices
    return records


def test_a_vllm_cell_records_the_kept_tokens_of_the_hf_plugin(lmms_eval_env, vllm_checkpoint, synth_data,
                                                              tmp_path) -> None:
    """vcast_vllm and vcast_qwen3_vl on the same checkpoint and items: the same kept mask per item."""
    ours = _check_records(_run_cell(_cell_spec(vllm_checkpoint, "vcast_vllm", "vcast", batch_size=2), tmp_path),
                          synth_data, "vcast", LIMIT)
    theirs = _check_records(_run_cell(_cell_spec(vllm_checkpoint, "vcast_qwen3_vl", "vcast"), tmp_path),
                            synth_data, "vcast", LIMIT)
    for key, record in ours.items():
        other = theirs[key]
        assert (record.geometry, record.frame_indices, record.budgets) == (
            other.geometry, other.frame_indices, other.budgets), key
        assert np.array_equal(record.kept, other.kept), f"{key}: vLLM kept other tokens than HF"
        assert 0 < record.kept.sum() < record.kept.size


def test_vllm_vanilla_keeps_every_token_and_record_kept_is_no_part_of_a_cell(lmms_eval_env, vllm_checkpoint, synth_data,
                                                                             tmp_path) -> None:
    """Vanilla's records keep every token; ``record_kept`` is a plugin argument that names the same
    cell either way (that ``record_kept=false`` writes no records: the uninterrupted run of
    :func:`test_a_killed_vllm_run_resumes_from_its_answers`)."""
    from vcast.eval.plugin_args import model_arg_problem
    from vcast.sweep.cell import identity_mismatch

    assert model_arg_problem("vcast_vllm", "record_kept") is None
    off = _cell_spec(vllm_checkpoint, "vcast_vllm", "vcast", limit=1, record_kept=False)
    on = _cell_spec(vllm_checkpoint, "vcast_vllm", "vcast", limit=1)
    assert on.relative_dir == off.relative_dir and identity_mismatch(off, on) == []

    vanilla = _check_records(_run_cell(_cell_spec(vllm_checkpoint, "vcast_vllm", "vanilla", limit=1), tmp_path),
                             synth_data, "vanilla", 1)
    assert all(record.kept.all() for record in vanilla.values())


# The lmms-eval plugin: item-level resume through the response cache ----------------------------

RESUME_LIMIT, KILL_AT = 6, 3  # the 3rd answer is journaled (fsynced), then SIGKILL before its upsert
KILL_POINTS = Path(__file__).parent / "support" / "kill_points"


def _eval_run(checkpoint, work: Path, use_cache: bool = True, record_kept: bool = True, **env: str):
    """``python -m vcast.eval.run`` of ``vcast_vllm`` (V-CAST, one request per call) on the first
    :data:`RESUME_LIMIT` items, in ``work`` (as a sweep runs a cell: the efficiency records, the
    cache and the outputs named relative to it, so every run has the same model arguments; the
    kept-token records, unless ``record_kept`` is false, in ``work/kept``)."""
    import subprocess
    import sys

    from vcast.sweep.execute import format_model_args

    model_args = format_model_args({"pretrained": str(checkpoint), "method": "vcast", "ratio": RATIO,
                                    "max_num_frames": FRAMES, **VLLM_ARGS, "efficiency_dir": "efficiency",
                                    **({} if record_kept else {"record_kept": False})})
    command = [sys.executable, "-m", "vcast.eval.run", "--model", "vcast_vllm", "--model_args", model_args,
               "--tasks", "vcast_synth", "--output_path", "lmms_eval", "--prompt_key", "qwen3_vl",
               "--limit", str(RESUME_LIMIT), *(["--use_cache", "cache"] if use_cache else [])]
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.run(command, check=False, cwd=work, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env})


def _outputs(work: Path) -> tuple[list[str], dict]:
    """The run's samples (each line byte for byte, in doc order) and its results' scores."""
    import json

    [samples] = (work / "lmms_eval").rglob("*_samples_vcast_synth.jsonl")
    [results] = (work / "lmms_eval").rglob("*_results.json")
    lines = sorted(samples.read_text(encoding="utf-8").splitlines(), key=lambda line: json.loads(line)["doc_id"])
    return lines, json.loads(results.read_text(encoding="utf-8"))["results"]


def test_a_killed_vllm_run_resumes_from_its_answers(lmms_eval_env, vllm_checkpoint, synth_data, tmp_path) -> None:
    """SIGKILL inside the response cache's write of the k-th answer (journaled, not yet in SQLite),
    then a rerun: it starts with k answers, computes only the others, and ends with the samples and
    scores of an uninterrupted run."""
    import contextlib
    import json
    import signal
    import sqlite3

    from vcast.eval.resume import read_attempts
    from vcast.kept_records import FOLDER
    from vcast.results.tree import Cell

    work = tmp_path / "resumed"
    path = os.pathsep.join(filter(None, [str(KILL_POINTS), os.environ.get("PYTHONPATH")]))
    killed = _eval_run(vllm_checkpoint, work, VCAST_KILL_AT=f"upsert:{KILL_AT}", PYTHONPATH=path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    cache = work / "cache"
    # The answers attempt 1 left: its journal's (the k-th there, not in its database)
    [journal] = cache.glob("runs/*/rank_0.audit.jsonl")
    kept = sorted(json.loads(line)["doc_id"] for line in journal.read_text().splitlines())
    resumed = _eval_run(vllm_checkpoint, work)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    assert [(a["attempt"], a["answered_before"]) for a in read_attempts(cache)] == [(1, 0), (2, KILL_AT)]
    with contextlib.closing(sqlite3.connect(cache / "cache.db")) as db:
        [(fingerprint,)] = db.execute("SELECT value FROM meta WHERE key = 'model_fingerprint'").fetchall()
    assert fingerprint.startswith("VCastVLLM|"), fingerprint
    records = Cell(work).efficiency()
    first = [doc for r in records if r["attempt"] == 1 for doc in r["doc_ids"]]
    second = [doc for r in records if r["attempt"] == 2 for doc in r["doc_ids"]]
    assert len(kept) == KILL_AT and sorted(first) == kept  # the k-th was computed too
    assert len(second) == RESUME_LIMIT - KILL_AT and set(second).isdisjoint(kept)
    assert sorted([*kept, *second]) == list(range(RESUME_LIMIT))
    progress = json.loads((work / "efficiency" / "progress.rank0.json").read_text())
    assert (progress["attempt"], progress["to_compute"], progress["computed"]) == (2, RESUME_LIMIT - KILL_AT,
                                                                                 RESUME_LIMIT - KILL_AT)

    # The uninterrupted run, without kept-token records (record_kept=false): the same answers, no records.
    uninterrupted = tmp_path / "uninterrupted"
    reference = _eval_run(vllm_checkpoint, uninterrupted, use_cache=False, record_kept=False)
    assert reference.returncode == 0, reference.stderr[-3000:]
    assert _outputs(work) == _outputs(uninterrupted)
    assert (work / FOLDER).is_dir() and (uninterrupted / "efficiency").is_dir()
    assert not (uninterrupted / FOLDER).exists()
