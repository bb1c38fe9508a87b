#!/usr/bin/env python
"""Peak memory and prefill latency of attention-based methods: our scores vs eager attention.

On a ``bench`` tiny checkpoint and generated 64- and 128-frame clips (448 x 448), each variant runs one
prefill forward (vision encoder included, ``use_cache=True``, last-token logits, as
``generate`` does) through ``vcast.models.attach``:

  vanilla    no pruning (the reference: every ratio below is to its sdpa run)
  vcast      V-CAST (needs no attention at all)
  flashvid   FlashVID (vision attention + an in-LLM FastV step)
  fastv      FastV (in-LLM, last-token attention at layer K - 1)

each once with **our scores** (the model runs SDPA; the few attention rows a method needs are
recomputed next to it, ``scores="rows"``) and once the **official way** (the model runs eager
attention, which materialises every layer's ``H x S x S`` weights; the method reads them,
``scores="eager"``). Variants are interleaved after a warm-up; the table shows medians.
Target: every method with our scores within 1.05x vanilla's peak memory. An eager run whose
attention cannot fit in the free memory is refused before it starts
(:mod:`vcast.models.eager_memory`); its row then says so.

    python scripts/bench_memory.py                               # qwen3_vl, CPU, 64 and 128 frames
    python scripts/bench_memory.py --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_prefill import processor_batch, synthetic_clip  # noqa: E402

from vcast.gpucheck.memory import prefill  # noqa: E402
from vcast.tiny_checkpoints import ARCHS, build_tiny_checkpoint  # noqa: E402

logger = logging.getLogger("bench_memory")
METHODS = ("vanilla", "vcast", "flashvid", "fastv")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", choices=ARCHS, default="qwen3_vl")
    parser.add_argument("--frames", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--side", type=int, default=448,
                        help="frame side in pixels (Qwen3-VL: 448 -> 14x14 tokens per temporal patch)")
    parser.add_argument("--ratio", type=float, default=0.25)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=None,
                        help="default: float32 on CPU, bfloat16 on CUDA")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if min(args.frames) < 2 or args.repeats < 1 or args.warmup < 0:
        parser.error(f"need --frames >= 2, --repeats >= 1, --warmup >= 0 (got {args.frames}, {args.repeats}, {args.warmup})")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))

    import transformers
    from transformers import AutoModelForImageTextToText, AutoProcessor

    with tempfile.TemporaryDirectory() as scratch:
        folder = build_tiny_checkpoint(args.arch, "bench", Path(scratch) / args.arch, seed=0)
        models = {kernel: AutoModelForImageTextToText.from_pretrained(folder, dtype=dtype, attn_implementation=kernel)
                  .to(device).eval() for kernel in ("sdpa", "eager")}
        processor = AutoProcessor.from_pretrained(folder)
    print(f"transformers {transformers.__version__} | torch {torch.__version__} | {device} "
          f"{str(dtype).removeprefix('torch.')} | threads {torch.get_num_threads()} | r = {args.ratio} | "
          f"medians of {args.repeats} after {args.warmup} warm-up")
    worst = 0.0
    for frames in args.frames:
        inputs = processor_batch(args.arch, processor, synthetic_clip(frames, args.side, seed=0), fps=2.0).to(device)
        if inputs.get("pixel_values_videos") is not None and inputs["pixel_values_videos"].is_floating_point():
            inputs["pixel_values_videos"] = inputs["pixel_values_videos"].to(dtype)
        variants = [(m, "ours") for m in args.methods] + [(m, "eager") for m in args.methods]
        results: dict[tuple[str, str], list[tuple[float, float, int]]] = {v: [] for v in variants}
        described: dict[tuple[str, str], Any] = {}
        refused: dict[tuple[str, str], str] = {}  # eager runs the memory guard turned down
        with torch.no_grad():
            for round_ in range(args.warmup + args.repeats):
                for method, mode in variants:
                    if (method, mode) in refused:
                        continue
                    model = models["sdpa" if mode == "ours" else "eager"]
                    try:
                        llm_s, call_s, peak, stats = prefill(model, inputs, method, args.ratio,
                                                             "rows" if mode == "ours" else "eager")
                    except ValueError as error:
                        if not str(error).startswith("scores='eager'"):
                            raise
                        refused[(method, mode)] = str(error)
                        logger.warning("%s %s refused: %s", method, mode, error)
                        continue
                    described[(method, mode)] = stats
                    if round_ >= args.warmup:
                        results[(method, mode)].append((llm_s, call_s, peak))
        base = described[("vanilla", "ours")] if ("vanilla", "ours") in described else None
        tokens = base.total_video_tokens if base is not None else "?"
        print(f"\n{args.arch} bench, {frames} frames of {args.side}px: {tokens} video tokens")
        print(f"{'method':<10}{'scores':<8}{'prefill ms':>11}{'call ms':>9}{'peak MB':>9}{'peak/van':>9}"
              f"{'prefill/van':>12}{'layer-avg %':>12}")
        med = {v: tuple(statistics.median(r[i] for r in results[v]) for i in range(3)) for v in variants
               if v not in refused}
        van = med.get(("vanilla", "ours"))
        for method, mode in variants:
            if (method, mode) in refused:
                print(f"{method:<10}{mode:<8} refused before the prefill: "
                      f"{refused[(method, mode)].split(' materialises ')[-1].split('; ')[0]}")
                continue
            llm_s, call_s, peak = med[(method, mode)]
            stats = described[(method, mode)]
            peak_ratio = peak / van[2] if van and van[2] else float("nan")
            time_ratio = llm_s / van[0] if van and van[0] else float("nan")
            share = stats.layer_retention
            print(f"{method:<10}{mode:<8}{llm_s * 1e3:>11.1f}{call_s * 1e3:>9.1f}{peak / 2**20:>9.1f}"
                  f"{peak_ratio:>9.3f}{time_ratio:>12.3f}{'' if share is None else f'{100 * share:.1f}':>12}")
            if mode == "ours" and peak_ratio == peak_ratio:
                worst = max(worst, peak_ratio)
    print(f"\nworst peak with our scores / vanilla = {worst:.3f}   (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
