#!/usr/bin/env python
"""Total time of one evaluation with and without the plugins' prefetching, side by side.

    python scripts/bench_prefetch.py                                   # tiny Qwen3-VL, vcast_synth, CPU
    python scripts/bench_prefetch.py --pretrained Qwen/Qwen3-VL-8B-Instruct --tasks videomme \\
        --frames 32 --limit 64 --extra-args max_pixels=1605632

Runs ``python -m vcast.eval.run`` (the sweep's runner: real lmms-eval, model loading untimed) once
per ``--prefetch`` value and repeat, alternating the order so neither always reads a warm file
cache, and reads each run's ``run_summary.json`` and efficiency records. Prints per run the
evaluation's wall time, the summed decode + preprocess time (``prepare_s``), the loop's summed
waits for it (``wait_s``) and the summed ``generate`` time, then the ratios that tell whether
reading hides behind the model: total / max(prepare, generate) (1.0 is perfect overlap) and
total / (prepare + generate) (1.0 is fully serial), and each run's speed-up over ``prefetch=0``.
Nothing is asserted; the numbers are measured on this machine, side by side.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

logger = logging.getLogger("bench_prefetch")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="vcast_qwen3_vl", help="plugin id (vcast_qwen3_vl or vcast_llava_ov)")
    parser.add_argument("--pretrained", default=str(ROOT / "checkpoints" / "tiny_qwen3_vl"))
    parser.add_argument("--prompt-key", default="qwen3_vl")
    parser.add_argument("--tasks", default="vcast_synth")
    parser.add_argument("--include-path", action="append", default=[])
    parser.add_argument("--method", default="vcast")
    parser.add_argument("--ratio", type=float, default=0.25)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--limit", type=float, default=16)
    parser.add_argument("--prefetch", type=int, nargs="+", default=[0, 2], help="values to compare (0 first)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--extra-args", default="max_pixels=16384,min_pixels=4096",
                        help="more model_args, k=v,k2=v2 (the default keeps the tiny run small)")
    parser.add_argument("--out", default=None, help="keep the runs' outputs here (default: a temporary folder)")
    return parser.parse_args(argv)


def run_once(args: argparse.Namespace, prefetch: int, folder: Path) -> dict[str, Any]:
    """One evaluation at ``prefetch``: its wall time and summed per-call times."""
    from vcast.results.tree import Cell

    efficiency = folder / "efficiency"
    model_args = (f"pretrained={args.pretrained},method={args.method},ratio={args.ratio},"
                  f"max_num_frames={args.frames},prefetch={prefetch},efficiency_dir={efficiency}")
    if args.extra_args:
        model_args += f",{args.extra_args}"
    command = [sys.executable, "-m", "vcast.eval.run", "--model", args.model, "--model_args", model_args,
               "--tasks", args.tasks, "--output_path", str(folder / "out"), "--batch_size", str(args.batch_size),
               "--prompt_key", args.prompt_key]
    if args.limit is not None:
        command += ["--limit", str(args.limit)]
    for path in args.include_path:
        command += ["--include_path", path]
    logger.info("prefetch=%d: %s", prefetch, " ".join(command))
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")})
    if done.returncode != 0:
        raise SystemExit(f"prefetch={prefetch} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    summary = json.loads((folder / "out" / "run_summary.json").read_text())
    records = Cell(folder).efficiency()
    return {"prefetch": prefetch, "total_s": summary["wall_s"], "calls": len(records),
            "items": sum(r["items"] for r in records),
            "prepare_s": sum(r.get("prepare_s") or 0.0 for r in records),
            "wait_s": sum(r.get("wait_s") or 0.0 for r in records),
            "generate_s": sum(r["generate_s"] for r in records)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_prefetch_"))
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        order = args.prefetch if repeat % 2 == 0 else list(reversed(args.prefetch))
        for prefetch in order:
            runs.append(run_once(args, prefetch, root / f"prefetch{prefetch}_run{repeat}"))
    baseline = median(r["total_s"] for r in runs if r["prefetch"] == args.prefetch[0])
    print(f"{args.model} {Path(args.pretrained).name} on {args.tasks} (limit {args.limit}), {args.frames} frames, "
          f"batch {args.batch_size}, method {args.method} r={args.ratio:g}; seconds summed over calls")
    print(f"{'prefetch':>8} {'items':>5} {'total':>9} {'prepare':>9} {'wait':>9} {'generate':>9} "
          f"{'tot/max':>8} {'tot/sum':>8} {'speed-up':>8}")
    for r in sorted(runs, key=lambda run: run["prefetch"]):
        busy = max(r["prepare_s"], r["generate_s"])
        serial = r["prepare_s"] + r["generate_s"]
        print(f"{r['prefetch']:>8} {r['items']:>5} {r['total_s']:>9.2f} {r['prepare_s']:>9.2f} {r['wait_s']:>9.2f} "
              f"{r['generate_s']:>9.2f} {r['total_s'] / busy if busy else float('nan'):>8.2f} "
              f"{r['total_s'] / serial if serial else float('nan'):>8.2f} {baseline / r['total_s']:>7.2f}x")
    print(f"(speed-up: the median total of prefetch={args.prefetch[0]} over each run's; runs in {root})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
