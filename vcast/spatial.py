"""Per-frame token scores and the per-frame top-b_t selection.

The dual-anchor score of token ``i`` of frame ``t`` (paper section 3.4) is
``w_div * (1 - cos(x_ti, x_bar_t)) + w_act * minmax_t(|x_ti|)``; ``diversity`` and
``activation`` keep one of the two terms (the paper's spatial ablation).
"""

from __future__ import annotations

import torch

from vcast.frame_stats import FrameStats
from vcast.temporal import EPS

SPATIAL_SCORERS = ("dual_anchor", "diversity", "activation")
MINMAX_EPS = 1e-6


def spatial_scores(
    stats: FrameStats,
    scorer: str = "dual_anchor",
    weights: tuple[float, float] = (1.0, 1.0),
) -> torch.Tensor:
    """Scores [T, P] (float32) from the token statistics of a video.

    ``weights`` is ``(w_div, w_act)``; ``scorer`` picks which terms are used.
    """
    w_div, w_act = weights
    norms = stats.norms  # [T, P]
    scores = torch.zeros_like(norms)
    if scorer in ("dual_anchor", "diversity"):
        mean_norms = torch.linalg.vector_norm(stats.means, dim=-1, keepdim=True)  # [T, 1]
        scores = scores + w_div * (1.0 - stats.dots / (norms * mean_norms + EPS))
    if scorer in ("dual_anchor", "activation"):
        low = norms.amin(dim=1, keepdim=True)
        high = norms.amax(dim=1, keepdim=True)
        scores = scores + w_act * (norms - low) / (high - low + MINMAX_EPS)
    elif scorer != "diversity":
        raise ValueError(f"spatial must be one of {SPATIAL_SCORERS}; got {scorer!r}")
    return scores


def top_per_frame(scores: torch.Tensor, budgets: torch.Tensor, total: int) -> torch.Tensor:
    """Ascending flat indices [total] of the ``budgets[t]`` best tokens of each frame.

    Args:
        scores: [T, P] higher is better; ties go to the lower token index.
        budgets: LongTensor [T] with ``budgets.sum() == total``.
        total: ``K``, known on the host, so the result needs no device-to-host sync.
    """
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    positions = torch.arange(scores.shape[1], device=scores.device).expand_as(order)
    ranks.scatter_(1, order, positions)
    kept = ranks < budgets.unsqueeze(1)
    return torch.nonzero_static(kept.flatten(), size=total).flatten()
