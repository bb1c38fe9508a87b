#!/usr/bin/env python
"""Requests per second of vLLM vs Hugging Face generate, vanilla vs V-CAST, side by side in one run.

    .venv-vllm/bin/python scripts/bench_vllm.py                      # bench-size random Qwen3-VL, CPU
    .venv-vllm/bin/python scripts/bench_vllm.py --model-dir Qwen/Qwen3-VL-8B-Instruct --requests 64

Runs in the vLLM environment (make setup-vllm), where transformers (< 5.20) also runs the HF side.
Every backend answers the same ``--requests`` prompts (one generated clip each, ``--frames`` frames,
greedy, ``--new-tokens`` tokens): HF one request at a time (``generate`` at batch 1, V-CAST through
``vcast.models.attach``), vLLM all requests in one ``generate`` call (its own batching, V-CAST
through the plugin). Each backend answers one warm-up request first, untimed; engine start-up is
not timed. Prints requests/s per backend and the ratios.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

FPS = 2.0


def make_clip(frames: int, side: int, seed: int) -> np.ndarray:
    """uint8 [T, side, side, 3]: noise and a moving bright square (frames differ, like a real clip)."""
    rng = np.random.default_rng(seed)
    video = rng.integers(0, 120, (frames, side, side, 3), dtype=np.uint8)
    for t in range(frames):
        y = x = (t * side) // (2 * frames)
        video[t, y: y + side // 4, x: x + side // 4] = 255
    return video


def run_hf(model_dir: str, prompt: str, clips: list[np.ndarray], method: str, ratio: float, new_tokens: int,
           dtype: torch.dtype) -> float:
    """Seconds for HF ``generate`` to answer every clip at batch 1 (after one untimed warm-up)."""
    import transformers
    from transformers.video_utils import VideoMetadata

    import vcast

    processor = transformers.AutoProcessor.from_pretrained(model_dir)
    model = transformers.AutoModelForImageTextToText.from_pretrained(model_dir, dtype=dtype).eval()
    handle = vcast.models.attach(model, method, ratio) if method != "vanilla" else None

    def answer(video: np.ndarray) -> None:
        metadata = VideoMetadata(total_num_frames=len(video), fps=FPS, frames_indices=list(range(len(video))))
        inputs = processor(text=[prompt], videos=[video], video_metadata=[metadata], do_sample_frames=False,
                           return_tensors="pt")
        with torch.inference_mode():
            model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)

    answer(clips[0])
    start = time.perf_counter()
    for video in clips:
        answer(video)
    seconds = time.perf_counter() - start
    if handle is not None:
        handle.detach()
    return seconds


def run_vllm(model_dir: str, prompt: str, clips: list[np.ndarray], method: str, ratio: float, new_tokens: int,
             dtype: str, engine: dict[str, Any]) -> float:
    """Seconds for one vLLM ``generate`` call to answer every clip (after one untimed warm-up)."""
    from vllm import LLM, SamplingParams

    import vcast.vllm

    llm = LLM(model=model_dir, dtype=dtype, seed=0, limit_mm_per_prompt={"video": 1, "image": 0},
              **engine, **vcast.vllm.engine_kwargs(model_dir, method, ratio))
    sampling = SamplingParams(temperature=0.0, max_tokens=new_tokens, min_tokens=new_tokens)

    def request(video: np.ndarray) -> dict[str, Any]:
        metadata = {"total_num_frames": len(video), "fps": FPS, "frames_indices": list(range(len(video))),
                    "do_sample_frames": False}
        return {"prompt": prompt, "multi_modal_data": {"video": [(video, metadata)]}}

    llm.generate([request(clips[0])], sampling, use_tqdm=False)
    start = time.perf_counter()
    llm.generate([request(video) for video in clips], sampling, use_tqdm=False)
    seconds = time.perf_counter() - start
    del llm
    gc.collect()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="checkpoint (default: build the bench-size random Qwen3-VL)")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--side", type=int, default=224, help="frame side in pixels")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--method", default="vcast")
    parser.add_argument("--ratio", type=float, default=0.25)
    parser.add_argument("--dtype", default=None, help="float32 on CPU, bfloat16 on GPU by default")
    parser.add_argument("--compile", action="store_true", help="let vLLM torch.compile (default: eager)")
    parser.add_argument("--kv-cache-mib", type=int, default=1024, help="CPU: vLLM's KV cache size")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from vllm.platforms import current_platform

    cpu = current_platform.is_cpu()
    dtype = args.dtype or ("float32" if cpu else "bfloat16")
    engine: dict[str, Any] = {"enforce_eager": not args.compile, "max_model_len": 16384}
    if cpu:
        engine.update(gpu_memory_utilization=0.2, kv_cache_memory_bytes=args.kv_cache_mib * 2**20)

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir
        if model_dir is None:
            from vcast.tiny_checkpoints import build_tiny_checkpoint

            model_dir = str(build_tiny_checkpoint("qwen3_vl", "bench", Path(tmp) / "bench", seed=0))
        import transformers

        processor = transformers.AutoProcessor.from_pretrained(model_dir)
        messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Describe the video."}]}]
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        clips = [make_clip(args.frames, args.side, seed) for seed in range(args.requests)]
        seconds = {}
        for method in ("vanilla", args.method):
            seconds[("HF", method)] = run_hf(model_dir, prompt, clips, method, args.ratio, args.new_tokens,
                                             getattr(torch, dtype))
            seconds[("vLLM", method)] = run_vllm(model_dir, prompt, clips, method, args.ratio, args.new_tokens,
                                                 dtype, engine)

    rate = {key: args.requests / value for key, value in seconds.items()}
    device = "CPU" if cpu else torch.cuda.get_device_name(0)
    print(f"{args.requests} requests, {args.frames} frames {args.side}px, {args.new_tokens} new tokens, {dtype}, "
          f"{device}, {args.method} r={args.ratio}")
    print(f"{'backend':<8}{'method':<10}{'requests/s':>12}")
    for (backend, method), value in rate.items():
        print(f"{backend:<8}{method:<10}{value:>12.3f}")
    print(f"vLLM / HF, vanilla: {rate[('vLLM', 'vanilla')] / rate[('HF', 'vanilla')]:.2f}x; "
          f"{args.method}: {rate[('vLLM', args.method)] / rate[('HF', args.method)]:.2f}x")
    print(f"{args.method} / vanilla, HF: {rate[('HF', args.method)] / rate[('HF', 'vanilla')]:.2f}x; "
          f"vLLM: {rate[('vLLM', args.method)] / rate[('vLLM', 'vanilla')]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
