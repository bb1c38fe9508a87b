#!/usr/bin/env python
"""Time every registered compressor on the same video tensor, side by side with V-CAST.

Each method runs on the same ``[T, P, D]`` tokens (and, where it declares them, the same
stand-in vision-encoder inputs); the table shows the median time, the ratio to V-CAST measured
in this run, and how many tokens each kept.

Several ``--frames`` give a sweep instead: every method's median time at each frame count side
by side, then its time per frame, and how much the time per frame grew from the fewest frames
to the most (1.00 = linear in the video length).

``--clip noise`` (default) is i.i.d. Gaussian tokens: no two frames alike, so a temporal method
sees only 1-frame segments. ``--clip scenes`` is a video-like clip
(:func:`vcast.synthetic_features.synthetic_video_features`: four scenes cut at 30%, 55% and 80%
of the frames, slow drift inside a scene, an event at 10%), so segments grow with the frame
count as in a real video sampled more densely.

    python scripts/bench_baselines.py                          # T=32, P=196 (14x14), D=3584, bf16
    python scripts/bench_baselines.py --device cuda --frames 64
    python scripts/bench_baselines.py --frames 32 64 128 256 --clip scenes --repeats 1 --warmup 0
"""

from __future__ import annotations

import argparse
import math

import vcast
from vcast.gpucheck import selection  # the timing functions, shared with the GPU check kit
from vcast.gpucheck.selection import CLIPS, DTYPES
from vcast.registry import is_token_method


def time_methods(methods: list[str], args: argparse.Namespace, num_frames: int) -> dict[str, tuple[float, int, bool]]:
    """``{method: (median seconds, tokens kept, merges)}`` of each method on one ``num_frames`` clip."""
    return selection.time_methods(methods, num_frames, args.side, args.dim, args.ratio, args.dtype, args.device,
                                  args.clip, args.repeats, args.warmup)


def print_sweep(methods: list[str], frame_counts: list[int], runs: dict[int, dict[str, tuple[float, int, bool]]]) -> None:
    """One row per method: ms at each frame count, ms per frame at each, and the per-frame growth."""
    first, last = frame_counts[0], frame_counts[-1]
    header = f"{'method':<20} {'kind':<6}" + "".join(f"{f'ms@{t}':>10}" for t in frame_counts)
    header += "".join(f"{f'ms/f@{t}':>9}" for t in frame_counts) + f" {f'growth {last}/{first}':>14}"
    print(header)
    for method in methods:
        per_frame = [runs[t][method][0] * 1e3 / t for t in frame_counts]
        row = f"{method:<20} {'merge' if runs[first][method][2] else 'prune':<6}"
        row += "".join(f"{runs[t][method][0] * 1e3:>10.1f}" for t in frame_counts)
        row += "".join(f"{value:>9.2f}" for value in per_frame) + f" {per_frame[-1] / per_frame[0]:>14.2f}"
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, nargs="+", default=[32],
                        help="frame count T (default 32); several (e.g. 32 64 128 256) print a side-by-side sweep")
    parser.add_argument("--side", type=int, default=14, help="token grid side: P = side * side (default 14: 196)")
    parser.add_argument("--dim", type=int, default=3584)
    parser.add_argument("--ratio", type=float, default=0.25)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--clip", choices=CLIPS, default="noise",
                        help="noise: i.i.d. tokens (default); scenes: a video-like clip whose segments grow with T")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--methods", nargs="*", help="default: every registered method but vanilla")
    args = parser.parse_args()
    frame_counts = sorted(set(args.frames))
    if frame_counts[0] < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error(f"need --frames >= 1, --repeats >= 1, --warmup >= 0 (got {args.frames}, {args.repeats}, "
                     f"{args.warmup})")

    # In-LLM methods need the model (scripts/bench_memory.py times them); only compressors here.
    methods = args.methods or [m for m in vcast.available_methods() if m != "vanilla" and is_token_method(m)]
    methods = ["vcast", *[m for m in methods if m != "vcast"]]
    tokens = args.side * args.side
    if len(frame_counts) > 1:
        print(f"T={','.join(map(str, frame_counts))} P={tokens} D={args.dim} {args.dtype} on {args.device}, "
              f"r={args.ratio}, clip {args.clip}: median selection time of {args.repeats} after {args.warmup} warm-up")
        print_sweep(methods, frame_counts, {t: time_methods(methods, args, t) for t in frame_counts})
        return
    num_frames = frame_counts[0]
    total = num_frames * tokens
    print(f"T={num_frames} P={tokens} D={args.dim} {args.dtype} on {args.device}, r={args.ratio}, clip {args.clip}: "
          f"B = floor(r*T*P) = {math.floor(args.ratio * total)} of {total}")
    results = time_methods(methods, args, num_frames)
    base = results["vcast"][0]
    print(f"{'method':<20} {'kind':<6} {'kept':>7} {'ms':>10} {'x V-CAST':>9}")
    for method, (seconds, kept, merges) in results.items():
        print(f"{method:<20} {'merge' if merges else 'prune':<6} {kept:>7} {seconds * 1e3:>10.2f} {seconds / base:>9.2f}")


if __name__ == "__main__":
    main()
