"""Reproduce the stock vLLM 0.32 video-pruning bugs the plugin works around (docs/vllm.md, upstream).

    .venv-vllm/bin/python -m vcast.vllm.repro cpu-flag     # (a) stock EVS on the CPU build crashes
    .venv-vllm/bin/python -m vcast.vllm.repro positions    # (b) stock EVS answers differ from HF's EVS
    .venv-vllm/bin/python -m vcast.vllm.repro chunked      # (c) a prefill chunk inside the video (the plugin's answer too)

Each builds the tiny Qwen3-VL (text head_dim 32) in a temporary folder, asks one question about one
generated clip in float32, greedy, and prints what it finds. The reference for (b) and (c) is HF
``generate`` with ``vcast.models.attach(model, "evs", r, variant="official")``, which keeps exactly
vLLM's EVS tokens (``baselines/simple/evs.py``) at their original positions: with right positions vLLM
must produce the same tokens, as the plugin does with ``method="evs"``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

FRAMES, SIDE, FPS, NEW_TOKENS = 8, 128, 4.0, 8
PRUNING_RATE = 0.75  # vLLM's q; EVS keeps 1 - q
VIDEO_SIZE = {"shortest_edge": 4096, "longest_edge": 16 * 128 * 128}


def _clip() -> Any:
    import numpy as np

    rng = np.random.default_rng(0)
    video = rng.integers(0, 120, (FRAMES, SIDE, SIDE, 3), dtype=np.uint8)
    for t in range(FRAMES):
        y = x = (t * SIDE) // (2 * FRAMES)
        video[t, y: y + SIDE // 4, x: x + SIDE // 4] = 255
    return video


def _prompt(checkpoint: Path) -> str:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(checkpoint)
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What moves?"}]}]
    return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def hf_evs_tokens(checkpoint: Path) -> list[int]:
    """HF + vcast's EVS (vLLM's variant) on the clip: the reference answer."""
    import transformers
    from transformers.video_utils import VideoMetadata

    import vcast

    processor = transformers.AutoProcessor.from_pretrained(checkpoint)
    inputs = processor(text=[_prompt(checkpoint)], videos=[_clip()], return_tensors="pt", do_sample_frames=False,
                       video_metadata=[VideoMetadata(total_num_frames=FRAMES, fps=FPS, frames_indices=list(range(FRAMES)))],
                       size=VIDEO_SIZE)
    model = transformers.Qwen3VLForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.float32).eval()
    vcast.models.attach(model, "evs", 1 - PRUNING_RATE, variant="official")
    with torch.inference_mode():
        output = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
    return output[0, inputs["input_ids"].shape[1]:].tolist()


def vllm_tokens(checkpoint: Path, **engine: Any) -> list[int]:
    """vLLM's greedy answer on the clip with ``engine`` options (float32, no compile)."""
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(checkpoint), dtype="float32", seed=0, max_model_len=1024, enforce_eager=True,
              gpu_memory_utilization=0.1, kv_cache_memory_bytes=64 * 2**20,
              limit_mm_per_prompt={"video": 1, "image": 0}, mm_processor_kwargs={"size": VIDEO_SIZE}, **engine)
    try:
        metadata = {"total_num_frames": FRAMES, "fps": FPS, "frames_indices": list(range(FRAMES)),
                    "do_sample_frames": False}
        request = {"prompt": _prompt(checkpoint), "multi_modal_data": {"video": [(_clip(), metadata)]}}
        output = llm.generate(request, SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS), use_tqdm=False)
        return list(output[0].outputs[0].token_ids)
    finally:
        del llm
        gc.collect()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bug", choices=("cpu-flag", "positions", "chunked"))
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import vcast.vllm
    from vcast.vllm.tiny_checkpoints import build_vllm_checkpoint

    stock_evs = {"video_pruning_rate": PRUNING_RATE, "video_pruning_method": "evs"}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = build_vllm_checkpoint("qwen3_vl", Path(tmp) / "qwen3_vl", seed=0)
        if args.bug == "cpu-flag":
            try:
                tokens = vllm_tokens(checkpoint, **stock_evs)
            except Exception as error:  # noqa: BLE001 - the point is to show it
                print(f"(a) stock EVS on the CPU build fails: {type(error).__name__}: {error}")
                return 0
            print(f"(a) not reproduced: stock EVS on this build answered {tokens}")
            return 0
        reference = hf_evs_tokens(checkpoint)
        plugin_kwargs = vcast.vllm.engine_kwargs(str(checkpoint), "evs", 1 - PRUNING_RATE, {"variant": "official"})
        plugin = vllm_tokens(checkpoint, **plugin_kwargs)
        fixed_a = {"worker_cls": vcast.vllm.CPU_WORKER}  # get past (a) to see (b) and (c)
        whole = vllm_tokens(checkpoint, **stock_evs, **fixed_a, enable_chunked_prefill=False,
                            enable_prefix_caching=False)
        rows = [("HF + EVS (reference)", reference), ("vcast plugin, method=evs", plugin),
                ("(b) stock EVS, one prefill", whole)]
        if args.bug == "chunked":  # (b) is in both stock runs; the difference between them is (c)
            chunked = vllm_tokens(checkpoint, **stock_evs, **fixed_a, enable_chunked_prefill=True,
                                  max_num_batched_tokens=16, enable_prefix_caching=False)
            rows.append(("(c) stock EVS, 16-token chunks", chunked))
            rows.append(("vcast plugin, 16-token chunks", vllm_tokens(checkpoint, max_num_batched_tokens=16, **plugin_kwargs)))
        for label, tokens in rows:
            print(f"{label:<32}{tokens}  {'== reference' if tokens == reference else '!= reference'}")
        if args.bug == "chunked":
            print(f"(c) chunking {'changes' if chunked != whole else 'does not change'} stock EVS's answer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
