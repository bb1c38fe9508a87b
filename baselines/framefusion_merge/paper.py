"""FrameFusion's first merge, ``variant="paper"``: float32 cosines, the decimal cap, stable ties.

The algorithm and its deviations from the release: :mod:`baselines.framefusion_merge`.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.selection import Selection
from vcast.temporal import cosine

logger = logging.getLogger(__name__)


def merge_cap(ratio: float, total: int) -> int:
    """``floor((1 - r) * N)``, the most tokens the first merge may remove (decimal r)."""
    return math.floor((1 - Fraction(repr(float(ratio)))) * total)


def previous_frame_similarity(frames: torch.Tensor) -> torch.Tensor:
    """``c[t, i] = cos(x[t, i], x[t-1, i])`` in float32, ``-inf`` for frame 0: [T, P, D] -> [T, P]."""
    x = frames.float()
    first = torch.full_like(x[:1, :, 0], float("-inf"))
    return torch.cat([first, cosine(x[1:], x[:-1])], dim=0)


def paper_merge_select(frames: torch.Tensor, ratio: float, threshold: float) -> Selection:
    """The paper variant's merge on ``frames`` [T, P, D] with cap ``floor((1 - r) N)`` and S_th ``threshold``.

    Returns the Selection of the unmerged tokens; ``tokens`` [K, D] float32, K = ``ceil(r * N)``
    when the cap binds, else ``N - |candidates|``.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    total = num_frames * tokens_per_frame
    device = frames.device

    sims = previous_frame_similarity(frames)  # [T, P]
    candidate = sims >= threshold  # frame 0 is -inf, never a candidate
    cap = merge_cap(ratio, total)
    num_candidates = int(candidate.sum())
    if num_candidates >= cap:
        # Only the cap's worth, most similar first, ties to the lower flat index. The top `cap`
        # are all candidates because there are at least `cap` of them.
        order = torch.sort(sims.flatten(), descending=True, stable=True).indices[:cap]
        merged = torch.zeros(total, dtype=torch.bool, device=device)
        merged[order] = True
        merged = merged.view(num_frames, tokens_per_frame)
    else:
        merged = candidate

    # Each token's representative: the latest unmerged frame at or before it on its patch
    # (frame 0 is never merged, so one always exists).
    frame_index = torch.arange(num_frames, device=device)[:, None].expand(num_frames, tokens_per_frame)
    anchor_frame = torch.cummax(torch.where(merged, torch.zeros_like(frame_index), frame_index), dim=0).values
    anchor_flat = (anchor_frame * tokens_per_frame + torch.arange(tokens_per_frame, device=device)).flatten()

    x = frames.reshape(total, dim).float()
    sums = torch.zeros_like(x).index_add_(0, anchor_flat, x)
    counts = torch.bincount(anchor_flat, minlength=total)
    positions = torch.nonzero(~merged.flatten()).flatten()
    tokens = sums[positions] / counts[positions, None].to(sums.dtype)

    logger.debug("framefusion_merge: N=%d candidates=%d cap=%d -> %d tokens", total, num_candidates, cap,
                 positions.numel())
    return selection_from_positions(positions, num_frames, tokens_per_frame, tokens=tokens)
