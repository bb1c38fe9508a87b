"""V-CAST ``variant="paper"``: our clean reading of the paper (sections 3.3-3.4, Algorithm 1),
scores in float32, with the ablation knobs (temporal, spatial, weights, allocation)."""

from __future__ import annotations

import logging

import torch

from vcast.allocation import allocate_official, allocate_paper
from vcast.budget import official_total_budget, paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.selection import Selection
from vcast.spatial import spatial_scores, top_per_frame
from vcast.temporal import temporal_weights

logger = logging.getLogger(__name__)

# allocation name -> (total budget B, per-frame apportionment)
ALLOCATIONS = {
    "paper": (paper_total_budget, allocate_paper),
    "official": (official_total_budget, allocate_official),
}


def paper_vcast_select(frames: torch.Tensor, ratio: float, tau: float, k_min: int, weights: tuple[float, float],
                       allocation: str, temporal: str, spatial: str, seed: int) -> Selection:
    """The paper's selection of ``frames`` [T, P, D], ``K`` tokens (parameters already checked).

    Args:
        frames: [T, P, D] video tokens; scored in float32 whatever their dtype.
        ratio: retention ratio r in (0, 1].
        tau: softmax temperature of the temporal density (> 0).
        k_min: tokens every frame keeps at least (0 <= k_min <= P).
        weights: (diversity, activation) weights of the dual-anchor score.
        allocation: a key of :data:`ALLOCATIONS`.
        temporal: a :data:`vcast.temporal.TEMPORAL_STRATEGIES` name.
        spatial: a :data:`vcast.spatial.SPATIAL_SCORERS` name.
        seed: seed of ``temporal="random"``.
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and the temporal density [T].
    """
    num_frames, tokens_per_frame, _ = frames.shape
    stats = frame_stats(frames)
    density = temporal_weights(temporal, frames, stats.means, tau, seed)
    total_budget, allocate = ALLOCATIONS[allocation]
    total = total_budget(ratio, num_frames, tokens_per_frame, k_min)
    budgets = allocate(density, total, tokens_per_frame, k_min)
    scores = spatial_scores(stats, spatial, weights)
    keep = top_per_frame(scores, budgets, total)
    logger.debug(
        "vcast: T=%d P=%d r=%.4g -> B=%d (%s allocation, %s temporal, %s spatial)",
        num_frames, tokens_per_frame, ratio, total, allocation, temporal, spatial,
    )
    return Selection(keep=keep, budgets=budgets, tokens_per_frame=tokens_per_frame, frame_weights=density)
