#!/usr/bin/env python
"""Time every registered compressor on the same video tensor, side by side with V-CAST.

Each method runs on the same ``[T, P, D]`` tokens (and, where it declares them, the same
stand-in vision-encoder inputs); the table shows the median time, the ratio to V-CAST measured
in this run, and how many tokens each kept.

    python scripts/bench_baselines.py                          # T=32, P=196 (14x14), D=3584, bf16
    python scripts/bench_baselines.py --device cuda --frames 64
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

import vcast
from vcast.registry import is_llm_method
from vcast.models.vision_probe import stand_in_inputs
from vcast.registry import method_inputs

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def timed(call, device: str, repeats: int, warmup: int) -> tuple[float, object]:
    for _ in range(warmup):
        call()
    seconds, result = [], None
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = call()
        if device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--side", type=int, default=14, help="token grid side: P = side * side (default 14: 196)")
    parser.add_argument("--dim", type=int, default=3584)
    parser.add_argument("--ratio", type=float, default=0.25)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--methods", nargs="*", help="default: every registered method but vanilla")
    args = parser.parse_args()

    # In-LLM methods need the model (scripts/bench_memory.py times them); only compressors here.
    methods = args.methods or [m for m in vcast.available_methods() if m != "vanilla" and not is_llm_method(m)]
    generator = torch.Generator().manual_seed(0)
    tokens = args.side * args.side
    frames = torch.randn(args.frames, tokens, args.dim, generator=generator).to(args.device, DTYPES[args.dtype])
    total = args.frames * tokens
    print(f"T={args.frames} P={tokens} D={args.dim} {args.dtype} on {args.device}, r={args.ratio}: "
          f"B = floor(r*T*P) = {math.floor(args.ratio * total)} of {total}")
    results = {}
    for method in ["vcast", *[m for m in methods if m != "vcast"]]:
        ratio = 0.25 if method.endswith("_2x2") else args.ratio  # these fix their own ratio
        extra = {name: value.to(args.device) if isinstance(value, torch.Tensor) else value
                 for name, value in stand_in_inputs(method_inputs(method), args.frames, (args.side, args.side), 72,
                                                    torch.Generator().manual_seed(1)).items()}
        seconds, selection = timed(lambda: vcast.select(frames, ratio, method=method, **extra), args.device,
                                   args.repeats, args.warmup)
        results[method] = (seconds, int(selection.keep.numel()), selection.merges)
    base = results["vcast"][0]
    print(f"{'method':<20} {'kind':<6} {'kept':>7} {'ms':>10} {'x V-CAST':>9}")
    for method, (seconds, kept, merges) in results.items():
        print(f"{method:<20} {'merge' if merges else 'prune':<6} {kept:>7} {seconds * 1e3:>10.2f} {seconds / base:>9.2f}")


if __name__ == "__main__":
    main()
