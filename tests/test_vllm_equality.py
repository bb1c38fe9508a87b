"""vLLM with the vcast plugin equals Hugging Face + ``vcast.models.attach`` (CPU, float32).

Runs in the vLLM environment (``make setup-vllm && make test-vllm``); skipped elsewhere. Both
sides run in that one process on the same checkpoint (the tiny Qwen3-VL with text head_dim 32,
which vLLM's CPU attention accepts), the same prompt and the same mp4-free clip through the same
transformers processor: vLLM pins transformers < 5.20, which vcast's HF path supports, so the
reference needs no second environment. Chunked prefill and prefix caching are off
(``vcast.vllm.engine_kwargs``).

Checked per method (dense; V-CAST on the MoE class too): the kept indices vLLM's model computed equal ``vcast.select`` on the HF
vision tower's tokens of the same video (and those tokens agree), and the greedy tokens vLLM
generates equal HF's with the method attached (which differ from HF's unpruned ones, so a
plugin that did not prune, or misplaced positions, fails).
"""

from __future__ import annotations

import gc
import os

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed in this environment: make setup-vllm, then "
                                           "make test-vllm runs this test with .venv-vllm's python")

import torch  # noqa: E402

from tests.model_inputs import QWEN_VIDEO_SIZE, clip  # noqa: E402

from vllm.platforms import current_platform  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not current_platform.is_cpu(), reason="the equality test is defined on vLLM's CPU "
                                 "build (float32 on both sides); this vLLM is a GPU build")]

FRAMES, SIDE, FPS = 8, 128, 4.0
RATIO = 0.25
NEW_TOKENS = 8
QUESTION = "What moves in this video?"
METHODS = ("vcast", "uniform", "random", "dycoke", "vidcom2", "evs")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vcast.vllm.tiny_checkpoints import build_vllm_checkpoint

    return build_vllm_checkpoint("qwen3_vl", tmp_path_factory.mktemp("vllm") / "qwen3_vl", seed=0)


@pytest.fixture(scope="module")
def prompt(checkpoint):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(checkpoint)
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": QUESTION}]}]
    return processor, processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


@pytest.fixture(scope="module")
def hf(checkpoint, prompt):
    """The HF model, its processor inputs for the clip, and the main post-merger video tokens [T, P, D]."""
    import transformers
    from transformers.video_utils import VideoMetadata

    processor, text = prompt
    inputs = processor(text=[text], videos=[clip(FRAMES, SIDE, seed=0)], return_tensors="pt",
                       video_metadata=[VideoMetadata(total_num_frames=FRAMES, fps=FPS, frames_indices=list(range(FRAMES)))],
                       do_sample_frames=False, size=QWEN_VIDEO_SIZE)
    model = transformers.Qwen3VLForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.float32).eval()
    with torch.inference_mode():
        encoded = model.model.get_video_features(pixel_values_videos=inputs["pixel_values_videos"],
                                                 video_grid_thw=inputs["video_grid_thw"])
    t, h, w = inputs["video_grid_thw"][0].tolist()
    merge = model.config.vision_config.spatial_merge_size
    frames = encoded.pooler_output[0].reshape(t, (h // merge) * (w // merge), -1)
    return model, inputs, frames


def hf_generate(model, inputs, method: str) -> list[int]:
    import vcast

    handle = vcast.models.attach(model, method, RATIO) if method != "vanilla" else None
    try:
        with torch.inference_mode():
            output = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
    finally:
        if handle is not None:
            handle.detach()
    return output[0, inputs["input_ids"].shape[1]:].tolist()


def vllm_run(checkpoint, text: str, method: str) -> tuple[list[int], list[dict]]:
    """Generated token ids and the model's records (kept indices, main tokens) of one request."""
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
        metadata = {"total_num_frames": FRAMES, "fps": FPS, "frames_indices": list(range(FRAMES)),
                    "do_sample_frames": False}
        request = {"prompt": text, "multi_modal_data": {"video": [(clip(FRAMES, SIDE, seed=0), metadata)]}}
        outputs = llm.generate(request, SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS))
        records = [] if method == "vanilla" else llm.apply_model(lambda model: list(model.vcast_records))[0]
        return list(outputs[0].outputs[0].token_ids), records
    finally:
        del llm
        gc.collect()


@pytest.mark.parametrize("method", METHODS)
def test_vllm_plugin_equals_hf_attach(checkpoint, prompt, hf, method: str) -> None:
    import vcast

    model, inputs, frames = hf
    _, text = prompt
    generated, records = vllm_run(checkpoint, text, method)

    assert len(records) == 1, f"vLLM's model pruned {len(records)} videos, expected 1"
    record = records[0]
    assert record["grid_thw"] == tuple(inputs["video_grid_thw"][0].tolist())
    torch.testing.assert_close(record["frames"], frames.float(), rtol=1e-4, atol=1e-4)
    expected_keep = vcast.select(frames, RATIO, method).keep
    assert record["keep"].tolist() == expected_keep.tolist()
    assert 0 < expected_keep.numel() < frames.shape[0] * frames.shape[1]

    reference = hf_generate(model, inputs, method)
    assert generated == reference, f"{method}: vLLM generated {generated}, HF + attach {reference}"
    # The check has teeth: pruning changes this model's answer.
    assert reference != hf_generate(model, inputs, "vanilla")


def test_vllm_plugin_equals_hf_attach_moe(tmp_path, prompt) -> None:
    """The MoE class: V-CAST's answer through vLLM equals HF's (the MoE tiny, experts saved in the
    released layout vLLM loads)."""
    import transformers
    from transformers.video_utils import VideoMetadata

    from vcast.vllm.tiny_checkpoints import build_vllm_checkpoint

    checkpoint = build_vllm_checkpoint("qwen3_vl_moe", tmp_path / "qwen3_vl_moe", seed=0)
    processor, text = prompt  # the MoE tiny shares the dense one's tokenizer and processor
    inputs = processor(text=[text], videos=[clip(FRAMES, SIDE, seed=0)], return_tensors="pt",
                       video_metadata=[VideoMetadata(total_num_frames=FRAMES, fps=FPS, frames_indices=list(range(FRAMES)))],
                       do_sample_frames=False, size=QWEN_VIDEO_SIZE)
    model = transformers.Qwen3VLMoeForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.float32).eval()
    generated, records = vllm_run(checkpoint, text, "vcast")
    assert len(records) == 1 and records[0]["keep"].numel() > 0
    reference = hf_generate(model, inputs, "vcast")
    assert generated == reference, f"MoE: vLLM generated {generated}, HF + attach {reference}"
    assert reference != hf_generate(model, inputs, "vanilla")


def test_vllm_vanilla_equals_hf(checkpoint, prompt, hf) -> None:
    """The stock model (no plugin settings) on the same inputs: the baseline the plugin builds on."""
    model, inputs, _ = hf
    generated, _ = vllm_run(checkpoint, prompt[1], "vanilla")
    assert generated == hf_generate(model, inputs, "vanilla")


def test_another_vllm_version_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, checkpoint) -> None:
    import vcast.vllm

    monkeypatch.setattr(vllm, "__version__", "0.31.0")
    with pytest.raises(RuntimeError, match=r"vLLM 0\.32\.0 .*but vLLM 0\.31\.0 is installed"):
        vcast.vllm.engine_kwargs(str(checkpoint), "vcast", RATIO)
