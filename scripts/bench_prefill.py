#!/usr/bin/env python
"""LLM prefill cost of V-CAST through ``vcast.models.attach``, against no pruning and the ideal.

On a ``bench`` tiny checkpoint (random weights, LLM big enough that prefill dominates; the
released checkpoints' video processing, so a clip gives the real token count) and a generated
64-frame clip of 448 x 448 (Qwen3-VL: 32 temporal patches x 196 tokens; LLaVA-OneVision: frames
resized to 384, 64 x 196 tokens), the video is encoded ONCE; then each variant runs one prefill forward
(``use_cache=True``, last-token logits, as ``generate`` does) on the same encoder outputs:

  (a) vanilla  the full prompt, no hooks
  (b) vcast    the full prompt with ``vcast.models.attach(model, ratio=r)``: the hooks find
               the video tokens, select, and re-lay the sequence inside the forward
  (c) ideal    the kept sequence fed directly (kept ids, pruned encoder outputs, kept
               positions), no hooks: what pruning would cost with zero machinery

Variants are interleaved, warm-up rounds first; the table shows medians. b/c near 1 means the
machinery costs nothing; b/a is the speed-up. The script also checks that (b) and (c) give the
same logits, so it compares like with like.

    python scripts/bench_prefill.py                          # qwen3_vl, CPU
    python scripts/bench_prefill.py --device cuda --dtype bfloat16
    python scripts/bench_prefill.py --arch llava_onevision --repeats 7
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

import vcast
from vcast.models.meters import PeakMemory, measure
from vcast.models.reference import encode, full_positions, pruned_inputs, survivors
from vcast.tiny_checkpoints import ARCHS, build_tiny_checkpoint

logger = logging.getLogger("bench_prefill")


def synthetic_clip(frames: int, side: int, seed: int) -> np.ndarray:
    """uint8 [T, side, side, 3]: noise, a square moving across, and a scene change halfway."""
    rng = np.random.default_rng(seed)
    video = rng.integers(0, 100, (frames, side, side, 3), dtype=np.uint8)
    video[frames // 2 :, ..., 0] += 100
    for t in range(frames):
        y = x = (t * side) // (2 * frames)
        video[t, y : y + side // 4, x : x + side // 4] = 255
    return video


def processor_batch(arch: str, processor: Any, video: np.ndarray, fps: float) -> Any:
    from transformers.video_utils import VideoMetadata

    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What happens in the video?"}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    kwargs: dict[str, Any] = {}
    if arch != "llava_onevision":  # every frame, at the checkpoint's own pixel budget
        frames = len(video)
        kwargs = dict(video_metadata=[VideoMetadata(total_num_frames=frames, fps=fps, frames_indices=list(range(frames)))],
                      do_sample_frames=False)
    return processor(text=[prompt], videos=[video], return_tensors="pt", **kwargs)


def full_inputs(model: Any, inputs: Any, encoded: dict[str, Any]) -> dict[str, Any]:
    """The unpruned prompt with the encoder outputs precomputed (and, for MRoPE families, its positions)."""
    kwargs: dict[str, Any] = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"],
                              "mm_encoder_outputs": dict(encoded)}
    if "mm_token_type_ids" in inputs:
        kwargs["mm_token_type_ids"] = inputs["mm_token_type_ids"]
    positions = full_positions(model, inputs, "original")
    if positions is not None and positions.dim() == 3:  # MRoPE: the model's own (t, h, w)
        kwargs["position_ids"] = positions
    return kwargs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", choices=ARCHS, default="qwen3_vl")
    parser.add_argument("--checkpoint", type=Path, help="a bench checkpoint folder (default: build one in a temp folder)")
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--side", type=int, default=448,
                        help="frame side in pixels (Qwen3-VL: 448 -> 14x14 tokens per temporal patch)")
    parser.add_argument("--ratio", type=float, default=0.25)
    parser.add_argument("--method", default="vcast")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=None,
                        help="default: float32 on CPU, bfloat16 on CUDA")
    parser.add_argument("--attn", default="sdpa", help="attn_implementation: sdpa, eager, flash_attention_2")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.frames < 2 or args.repeats < 1 or args.warmup < 0:
        parser.error(f"need --frames >= 2, --repeats >= 1, --warmup >= 0 (got {args.frames}, {args.repeats}, {args.warmup})")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))

    import transformers
    from transformers import AutoModelForImageTextToText, AutoProcessor

    with tempfile.TemporaryDirectory() as scratch:
        folder = args.checkpoint or build_tiny_checkpoint(args.arch, "bench", Path(scratch) / args.arch, seed=0)
        model = AutoModelForImageTextToText.from_pretrained(folder, dtype=dtype, attn_implementation=args.attn)
        processor = AutoProcessor.from_pretrained(folder)
    model = model.to(device).eval()
    inputs = processor_batch(args.arch, processor, synthetic_clip(args.frames, args.side, seed=0), fps=2.0).to(device)
    if inputs.get("pixel_values_videos") is not None and inputs["pixel_values_videos"].is_floating_point():
        inputs["pixel_values_videos"] = inputs["pixel_values_videos"].to(dtype)

    with torch.no_grad():
        encoded = encode(model, inputs)  # the one video encode all variants share
        full = full_inputs(model, inputs, encoded)
        with vcast.models.attach(model, args.method, args.ratio) as handle:
            model(**full, use_cache=True, logits_to_keep=1)
            first = handle.stats
        ideal = pruned_inputs(model, inputs, encoded, survivors(first, inputs["input_ids"]), handle.adapter.positions)

    def vanilla() -> torch.Tensor:
        return model(**full, use_cache=True, logits_to_keep=1).logits

    def ideal_prefill() -> torch.Tensor:
        return model(**ideal, use_cache=True, logits_to_keep=1).logits

    times: dict[str, list[float]] = {"a": [], "b": [], "c": []}
    peaks: dict[str, list[int]] = {"a": [], "b": [], "c": []}
    hook_split: list[tuple[float, float]] = []
    meter = PeakMemory(device)
    logits: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for round_ in range(args.warmup + args.repeats):
            for key in ("a", "b", "c"):
                if key == "b":
                    handle = vcast.models.attach(model, args.method, args.ratio)
                    seconds, peak, logits[key] = measure(vanilla, device, meter)
                    stats = handle.stats
                    handle.detach()
                    if round_ >= args.warmup:
                        hook_split.append((stats.selection_s, stats.prefill_s))
                else:
                    seconds, peak, logits[key] = measure(vanilla if key == "a" else ideal_prefill, device, meter)
                if round_ >= args.warmup:
                    times[key].append(seconds)
                    peaks[key].append(peak)

    difference = (logits["b"].float() - logits["c"].float()).abs().max().item()
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    video = first.videos[0]
    print(f"transformers {transformers.__version__} | torch {torch.__version__} | {device} {str(dtype).removeprefix('torch.')} "
          f"| attn {args.attn} | threads {torch.get_num_threads()}")
    print(f"{args.arch} bench: {args.frames} frames of {args.side}px -> T={video.frames} x P={video.tokens_per_frame} "
          f"= {video.total} video tokens; prompt {first.tokens_before[0]} -> {first.tokens_after[0]} tokens "
          f"({args.method}, r={args.ratio}); medians of {args.repeats} after {args.warmup} warm-up")
    print(f"{'variant':<34}{'prefill ms':>12}{'peak MB':>10}")
    names = {"a": "(a) vanilla", "b": f"(b) {args.method} via attach", "c": "(c) ideal: kept sequence, no hooks"}
    med = {k: statistics.median(v) for k, v in times.items()}
    for key in ("a", "b", "c"):
        print(f"{names[key]:<34}{med[key] * 1e3:>12.1f}{statistics.median(peaks[key]) / 2**20:>10.1f}")
    selection = statistics.median(s for s, _ in hook_split)
    llm = statistics.median(p for _, p in hook_split)
    print(f"inside (b): selection + re-layout {selection * 1e3:.1f} ms, LLM prefill {llm * 1e3:.1f} ms")
    print(f"b/a = {med['b'] / med['a']:.3f}   (target <= 0.35)")
    print(f"b/c = {med['b'] / med['c']:.3f}   (target <= 1.05)")
    print(f"max |logits b - c| = {difference:.2e}")
    if difference > tolerance:
        logger.error("(b) and (c) disagree (max |difference| %.3g > %.1g): they are not the same pruned prompt",
                     difference, tolerance)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
