"""VidCom2 ``variant="paper"``: uniqueness (or V-CAST curvature) frame budgets, then each frame's
tokens least like the video and frame centres, all in float32 (see :mod:`baselines.vidcom2`)."""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.allocation import allocate_paper
from vcast.budget import paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.selection import Selection
from vcast.spatial import top_per_frame
from vcast.temporal import (
    low_variance_unit_tokens,
    multiscale_gaussian_similarity,
    temporal_weights,
    uniqueness_softmax,
    video_centre_similarity,
)

logger = logging.getLogger(__name__)


def official_frame_budgets(q: torch.Tensor, ratio: float, tokens_per_frame: int) -> torch.Tensor:
    """The released rule ``b_t = max(1, round_half_even(min(1, r (1 + q_t - 1/T)) * P))``.

    Args:
        q: [T] float32 frame uniqueness (softmax at temperature 0.01).
        ratio: r.
        tokens_per_frame: P.
    Returns:
        LongTensor [T]; its sum is only about ``r T P``.
    """
    scale = (ratio * (1 + q - 1 / q.numel())).clamp(max=1.0)
    return torch.round(scale * tokens_per_frame).long().clamp_min(1)  # torch.round: half to even


def paper_select(frames: torch.Tensor, ratio: float, temporal: str, allocation: str, tau: float) -> Selection:
    """Keep, in each frame of ``frames`` [T, P, D], the tokens least similar to the video and frame
    centres (float32 scores; arguments checked by :func:`baselines.vidcom2.method.vidcom2_select`).

    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and the temporal density [T] (float32).
    """
    num_frames, tokens_per_frame, _ = frames.shape

    tokens = low_variance_unit_tokens(frames)  # [T, P, C] float32, unit rows
    video_sim = video_centre_similarity(tokens)  # [T, P]
    frame_sim = multiscale_gaussian_similarity(tokens, tokens.mean(dim=1, keepdim=True))  # [T, P]

    if temporal == "curvature":
        density = temporal_weights("curvature", frames, frame_stats(frames).means, tau, seed=0)
        total = paper_total_budget(ratio, num_frames, tokens_per_frame, k_min=1)
        budgets = allocate_paper(density, total, tokens_per_frame, k_min=1)
    else:
        q = uniqueness_softmax(video_sim)
        density = (1 + q - 1 / num_frames) / num_frames
        if allocation == "official":
            budgets = official_frame_budgets(q, ratio, tokens_per_frame)
            total = int(budgets.sum())
        else:
            total = paper_total_budget(ratio, num_frames, tokens_per_frame, k_min=0)
            k_min = 1 if total >= num_frames else 0
            budgets = allocate_paper(density, total, tokens_per_frame, k_min=k_min)

    # Smallest v + f first; top_per_frame keeps the largest, ties to the lower token index.
    keep = top_per_frame(-(video_sim + frame_sim), budgets, total)
    logger.debug("vidcom2: T=%d P=%d r=%.4g -> K=%d (%s temporal, %s allocation)",
                 num_frames, tokens_per_frame, ratio, total, temporal, allocation)
    return selection_from_positions(keep, num_frames, tokens_per_frame, frame_weights=density)

