"""The clip, prompts and Hugging Face reference the vLLM plugin's tests share (tests/test_vllm_equality.py,
tests/test_vllm_chunked.py): generated clips of :data:`FRAMES` frames, the same processor call on the
HF side, and HF ``generate`` with a method attached."""

from __future__ import annotations

from typing import Any

import torch

from tests.model_inputs import QWEN_VIDEO_SIZE, clip

FRAMES, SIDE, FPS = 8, 128, 4.0
RATIO = 0.25
NEW_TOKENS = 8


def chat_text(processor: Any, question: str, videos: int = 1) -> str:
    """The chat template's prompt for ``videos`` videos then ``question``, ready for generation."""
    content = [{"type": "video"}] * videos + [{"type": "text", "text": question}]
    return processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                         tokenize=False)


def vllm_metadata(**extra: Any) -> dict:
    """A clip's metadata as vLLM takes it (every frame sampled already), plus ``extra``."""
    return {"total_num_frames": FRAMES, "fps": FPS, "frames_indices": list(range(FRAMES)), "do_sample_frames": False,
            **extra}


def hf_video_inputs(processor: Any, text: str, seeds: list[int]) -> Any:
    """The processor's inputs for ``text`` with one clip per seed (the frames vLLM gets, unsampled)."""
    from transformers.video_utils import VideoMetadata

    metadata = [VideoMetadata(total_num_frames=FRAMES, fps=FPS, frames_indices=list(range(FRAMES))) for _ in seeds]
    return processor(text=[text], videos=[clip(FRAMES, SIDE, seed=seed) for seed in seeds], return_tensors="pt",
                     video_metadata=metadata, do_sample_frames=False, size=QWEN_VIDEO_SIZE)


def hf_generate(model: Any, inputs: Any, method: str, with_stats: bool = False, ratio: float = RATIO):
    """HF's greedy token ids for ``inputs`` with ``method`` attached at ``ratio``; with ``with_stats``,
    also the pruning handle's stats of the call (what the HF plugins build their kept-token records from)."""
    import vcast

    handle = vcast.models.attach(model, method, ratio) if method != "vanilla" else None
    try:
        with torch.inference_mode():
            output = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
        stats = None if handle is None else handle.stats
    finally:
        if handle is not None:
            handle.detach()
    tokens = output[0, inputs["input_ids"].shape[1]:].tolist()
    return (tokens, stats) if with_stats else tokens
