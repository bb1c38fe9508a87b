#!/usr/bin/env python
"""Time ``vcast.select`` against a per-frame-loop V-CAST on the same tensors.

The loop version is written here, structured like the released code (a Python loop over
frames for the means, the curvature, the leftover tokens and the per-frame top-k). Both use
the released ("official") allocation so that their budgets can be checked equal.

    python scripts/bench_select.py                 # T in {32, 128}, P=196, D=4096, fp32 + bf16
    python scripts/bench_select.py --device cuda   # on a GPU
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

import vcast
from vcast.budget import official_total_budget


def loop_vcast(frames: torch.Tensor, ratio: float, tau: float = 0.7, k_min: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference V-CAST with Python loops (released-code structure). Returns (keep, budgets)."""
    num_frames, tokens_per_frame, _ = frames.shape
    means = []
    for t in range(num_frames):
        means.append(F.normalize(frames[t].float().mean(dim=0), dim=0, eps=1e-6))
    kappa = [1.0] * num_frames
    for t in range(1, num_frames - 1):
        v_in, v_out = means[t] - means[t - 1], means[t + 1] - means[t]
        dot = float((v_in * v_out).sum())
        kappa[t] = 1.0 - dot / (float(v_in.norm()) * float(v_out.norm()) + 1e-6)
    weights = torch.softmax(torch.tensor(kappa) / tau, dim=0)
    total = official_total_budget(ratio, num_frames, tokens_per_frame, k_min)
    rest = total - num_frames * k_min
    budgets, fracs = [], []
    for t in range(num_frames):
        raw = float(weights[t]) * rest
        budgets.append(k_min + min(int(raw // 1), tokens_per_frame - k_min))
        fracs.append(raw - raw // 1 if budgets[-1] < tokens_per_frame else -1.0)
    for _ in range(total - sum(budgets)):
        best = max(range(num_frames), key=lambda i: (fracs[i], -i))
        if fracs[best] < 0:
            break
        budgets[best] += 1
        if budgets[best] >= tokens_per_frame:
            fracs[best] = -1.0
    keep = []
    for t in range(num_frames):
        x = frames[t].float()
        mean = x.mean(dim=0, keepdim=True)
        outlier = 1.0 - F.cosine_similarity(x, mean, dim=-1, eps=1e-6)
        norms = x.norm(dim=-1)
        activation = (norms - norms.min()) / (norms.max() - norms.min() + 1e-6)
        top = torch.topk(outlier + activation, budgets[t]).indices
        keep.append(torch.sort(top).values + t * tokens_per_frame)
    return torch.cat(keep), torch.tensor(budgets)


def interleaved_medians(
    fns: list[Callable[[], object]], device: torch.device, repeats: int, warmup: int
) -> list[float]:
    """Median seconds of each function, timed in alternation so that both see the same
    machine load."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times: list[list[float]] = [[] for _ in fns]
    for round_index in range(warmup + repeats):
        for fn, bucket in zip(fns, times):
            sync()
            start = time.perf_counter()
            fn()
            sync()
            if round_index >= warmup:
                bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) for bucket in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, nargs="+", default=[32, 128], help="T values")
    parser.add_argument("--tokens", type=int, default=196, help="P")
    parser.add_argument("--dim", type=int, default=4096, help="D")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--ratio", type=float, default=0.25)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(args.seed)
    print(f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"P={args.tokens} D={args.dim} r={args.ratio} (median of {args.repeats}, {args.warmup} warm-up)")
    print(f"{'T':>5} {'dtype':>9} {'loop ms':>9} {'vcast ms':>9} {'speedup':>8} {'budgets equal':>13} {'keep overlap':>12}")
    for num_frames in args.frames:
        base = torch.randn(num_frames, args.tokens, args.dim, generator=generator)
        for dtype_name in args.dtypes:
            frames = base.to(device=device, dtype=getattr(torch, dtype_name))
            ours = vcast.select(frames, args.ratio, allocation="official")
            loop_keep, loop_budgets = loop_vcast(frames, args.ratio)
            same = torch.equal(ours.budgets.cpu(), loop_budgets)
            overlap = torch.isin(ours.keep.cpu(), loop_keep.cpu()).float().mean().item()
            t_loop, t_ours = interleaved_medians(
                [
                    lambda: loop_vcast(frames, args.ratio),
                    lambda: vcast.select(frames, args.ratio, allocation="official"),
                ],
                device,
                args.repeats,
                args.warmup,
            )
            print(f"{num_frames:>5} {dtype_name:>9} {t_loop * 1e3:>9.2f} {t_ours * 1e3:>9.2f} "
                  f"{t_loop / t_ours:>7.2f}x {str(same):>13} {overlap:>12.4f}")


if __name__ == "__main__":
    main()
