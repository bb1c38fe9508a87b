"""V-CAST: curvature-guided temporal allocation + dual-anchor spatial selection.

Paper: "V-CAST: Video Curvature-Aware Spatio-Temporal Pruning for Efficient Video Large
Language Models", sections 3.3-3.4 and Algorithm 1. Official code: xinyouu/V-CAST @c235ef3,
``compressor/v_cast`` (see ``shared/design/reference_methods.md`` section 3). Pure pruning: kept
tokens are returned by index, so adapters keep each one at its original (t, h, w) position.

Differences from the released code, on purpose:
* ``allocation="paper"`` (default) is the paper's rule: ``B = floor(r T P)`` and a capped
  largest-remainder apportionment. ``allocation="official"`` reproduces the released
  allocator bit for bit (``round``, and the leftover pile-up onto one frame).
* All scores (frame means, curvature, cosines, norms) are computed in float32 whatever the
  input dtype; the released code computes the curvature and cosines in bf16 for bf16 input.
* Ties in the per-frame top-k go to the lower token index (the released ``topk`` leaves them to
  the kernel).
* ``r``, ``tau``, ``k_min`` and the two anchor weights are parameters (hard-coded there).
"""

from __future__ import annotations

import logging

import torch

from vcast.allocation import allocate_official, allocate_paper
from vcast.budget import official_total_budget, paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.spatial import SPATIAL_SCORERS, spatial_scores, top_per_frame
from vcast.temporal import TEMPORAL_STRATEGIES, temporal_weights
from vcast.validation import check_choice, check_int, check_positive, check_weights

logger = logging.getLogger(__name__)

ALLOCATIONS = {
    "paper": (paper_total_budget, allocate_paper),
    "official": (official_total_budget, allocate_official),
}


@register_method("vcast")
def vcast_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    tau: float = 0.7,
    k_min: int = 1,
    weights: tuple[float, float] = (1.0, 1.0),
    allocation: str = "paper",
    temporal: str = "curvature",
    spatial: str = "dual_anchor",
    seed: int = 0,
) -> Selection:
    """Select ``K`` of the ``T * P`` tokens of ``frames`` [T, P, D].

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: retention ratio r in (0, 1].
        tau: softmax temperature of the temporal density (> 0).
        k_min: tokens every frame keeps at least (0 <= k_min <= P).
        weights: (diversity, activation) weights of the dual-anchor score.
        allocation: ``"paper"`` or ``"official"`` integer apportionment (module docstring).
        temporal: ``curvature`` | ``uniform`` | ``random`` | ``uniqueness``.
        spatial: ``dual_anchor`` | ``diversity`` | ``activation``.
        seed: seed of ``temporal="random"``.
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and the temporal density [T].
    """
    num_frames, tokens_per_frame, _ = frames.shape
    tau = check_positive("tau", tau)
    k_min = check_int("k_min", k_min, 0, tokens_per_frame)
    weights = check_weights("weights", weights)
    check_choice("allocation", allocation, ALLOCATIONS)
    check_choice("temporal", temporal, TEMPORAL_STRATEGIES)
    check_choice("spatial", spatial, SPATIAL_SCORERS)
    seed = check_int("seed", seed, 0)

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
