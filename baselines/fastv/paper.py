"""FastV, ``variant="paper"``: the top ``round(N * keep)`` (halves up) by the last token's float32 attention.

What it does and how it deviates from the release: :mod:`baselines.fastv`.
"""

from __future__ import annotations

import math

from baselines.common.dpc_knn import top_indices
from baselines.common.llm_scores import last_token_scores
from vcast.models.llm_plan import StageChoice, StageInputs


def top_share(inputs: StageInputs, keep: float) -> StageChoice:
    """Keep the ``round(N * keep)`` (halves up, at least 1) video tokens with the highest last-token attention."""
    count = min(inputs.visual.numel(), max(1, math.floor(inputs.visual.numel() * keep + 0.5)))
    return StageChoice(keep=top_indices(last_token_scores(inputs), count))
