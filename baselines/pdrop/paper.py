"""PDrop, ``variant="paper"``: each stage keeps ``int(N0 * lam^(i+1))`` (at least 1) by the last
token's float32 attention.

What it does and how it deviates from the release: :mod:`baselines.pdrop`.
"""

from __future__ import annotations

import math

from baselines.common.dpc_knn import top_indices
from baselines.common.llm_scores import last_token_scores
from vcast.models.llm_plan import StageChoice, StageInputs

FLOOR_TOLERANCE = 1e-9


def stage_count(entry_tokens: int, lam: float, stage: int) -> int:
    """Video tokens kept after stage ``stage`` (0-based): ``int(N0 * lam^(stage+1))``, at least 1."""
    return max(1, math.floor(entry_tokens * lam ** (stage + 1) + FLOOR_TOLERANCE))


def pdrop_choose(inputs: StageInputs, lam: float) -> StageChoice:
    """Keep the ``int(N0 * lam^(i+1))`` video tokens with the highest last-token attention."""
    count = min(inputs.visual.numel(), stage_count(inputs.entry_tokens, lam, inputs.stage))
    if inputs.attention is None:  # no prompt row to score with: keep the earliest tokens (ties to the lower index)
        return StageChoice(keep=top_indices(inputs.visual.new_zeros(inputs.visual.numel()).float(), count))
    return StageChoice(keep=top_indices(last_token_scores(inputs), count))
