"""PruneVid's official defaults (Visual-AI/PruneVid@b12600c ``scripts/eval.sh``) resolved for a
model: the stage layer scaled to its depth, and the split of the ratio into stage A's and stage B's
shares (``r = gamma * alpha``); the same for both variants."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

from vcast.models.llm_plan import layer_scaled
from vcast.validation import check_range

REFERENCE_LAYERS = 32  # PLLaVA-7B's LLaMA
REFERENCE_SELECTED_LAYER = 10  # scripts/eval.sh (MVBench, VideoMME, EgoSchema)
DEFAULT_CLUSTER_RATIO = 0.5  # gamma, scripts/eval.sh


def default_selected_layer(num_layers: int) -> int:
    """``S_sel``: the official 10 of 32, moved as the stage layer ``S_sel + 1`` to ``num_layers``."""
    return layer_scaled(REFERENCE_SELECTED_LAYER + 1, REFERENCE_LAYERS, num_layers) - 1


def split_ratio(ratio: float, alpha: Optional[float], cluster_ratio: Optional[float]) -> tuple[float, Fraction]:
    """``(gamma, alpha)`` with ``gamma * alpha == ratio`` (see the :mod:`baselines.prunevid`
    docstring); alpha exact."""
    r = Fraction(repr(float(ratio)))
    if alpha is not None and cluster_ratio is not None:
        raise ValueError("give at most one of alpha and cluster_ratio: the ratio fixes their product "
                         f"(ratio {ratio}, alpha {alpha}, cluster_ratio {cluster_ratio})")
    if alpha is not None:
        alpha = check_range("alpha", alpha, 0.0, 1.0)
        a = Fraction(repr(alpha))
        if a < r:
            raise ValueError(f"alpha must be >= the ratio {ratio} (stage A keeps ratio / alpha <= 1), got {alpha}")
        return float(r / a), a
    if cluster_ratio is not None:
        cluster_ratio = check_range("cluster_ratio", cluster_ratio, 0.0, 1.0)
        gamma = Fraction(repr(cluster_ratio))
        if gamma < r:
            raise ValueError(f"cluster_ratio must be >= the ratio {ratio} (stage B keeps ratio / cluster_ratio "
                             f"<= 1), got {cluster_ratio}")
        return cluster_ratio, r / gamma
    # Official gamma up to r = 0.25; above, gamma = alpha = sqrt(r), so stage B never vanishes.
    gamma = max(DEFAULT_CLUSTER_RATIO, math.sqrt(float(r)))
    return gamma, r / Fraction(repr(gamma))
