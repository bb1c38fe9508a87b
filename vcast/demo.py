"""``make demo``: V-CAST on a generated video-feature tensor.

Prints, per frame, the curvature-derived density and the budgets of the paper's allocation
and of the released code's, then how many tokens were kept.

    python -m vcast.demo [--frames 24 --tokens 64 --dim 128 --ratio 0.25 --seed 0]
"""

from __future__ import annotations

import argparse
import sys

if __name__ == "__main__":  # before the imports below: a Ctrl-C while they load ends with one line too
    from vcast.interrupt_guard import guard_imports

    guard_imports()

import vcast  # noqa: E402
from vcast.closed_pipe import run_command  # noqa: E402
from vcast.synthetic_features import synthetic_video_features  # noqa: E402
from vcast.temporal import curvature, unit_directions  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="V-CAST on a synthetic video-feature tensor.")
    parser.add_argument("--frames", type=int, default=24, help="T")
    parser.add_argument("--tokens", type=int, default=64, help="P")
    parser.add_argument("--dim", type=int, default=128, help="D")
    parser.add_argument("--ratio", type=float, default=0.25)
    parser.add_argument("--tau", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    video = synthetic_video_features(args.frames, args.tokens, args.dim, seed=args.seed)
    frames = video.features
    paper = vcast.select(frames, args.ratio, tau=args.tau)
    official = vcast.select(frames, args.ratio, tau=args.tau, allocation="official")
    kappa = curvature(unit_directions(frames.float().mean(dim=1)))
    kept_per_frame = paper.mask().sum(dim=1)

    lines = [
        f"V-CAST on a synthetic video: T={args.frames} frames x P={args.tokens} tokens x D={args.dim}, "
        f"r={args.ratio}, tau={args.tau}, seed={args.seed}",
        f"planted: scene cut at frame(s) {list(video.scene_cuts)}, object visible in frames "
        f"{list(video.event_frames)}",
        f"{'frame':>5} {'curvature':>9} {'density':>8} {'budget':>6} {'kept':>4} {'official':>8}  event",
    ]
    for t in range(args.frames):
        marks = []
        if t in video.scene_cuts:
            marks.append("scene cut")
        if t in video.event_frames:
            marks.append("object")
        lines.append(
            f"{t:>5} {float(kappa[t]):>9.3f} {float(paper.frame_weights[t]):>8.4f} "
            f"{int(paper.budgets[t]):>6} {int(kept_per_frame[t]):>4} {int(official.budgets[t]):>8}  {', '.join(marks)}"
        )
    total = args.frames * args.tokens
    lines.append(
        f"kept {paper.keep.numel()} of {total} tokens ({paper.keep.numel() / total:.1%}) with the paper's "
        f"allocation; {official.keep.numel()} with the released code's"
    )
    # The command's product, written to stdout (not logged): a logging handler would swallow a
    # closed pipe's error and print a "Logging error" per line instead of ending quietly.
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
