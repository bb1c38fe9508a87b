"""FastV, ``variant="official"``: pkunlp-icler/FastV@d165972's count and ``topk`` on the model-dtype scores.

What is bit-equal and what is not: :mod:`baselines.fastv`.
"""

from __future__ import annotations

from baselines.common.llm_scores import last_token_scores
from vcast.models.llm_plan import StageChoice, StageInputs


def official_count(tokens: int, keep: float) -> int:
    """The release's ``round(N * (1 - R))`` with ``R = 1 - keep``: Python's ``round`` (halves to even, may be 0)."""
    prune = 1.0 - keep  # FastV's R, the pruned share
    return min(tokens, round(tokens * (1 - prune)))


def official_top(inputs: StageInputs, keep: float) -> StageChoice:
    """The release's choice: ``topk(round(N * (1 - R)))`` of the head-mean last-token row (in the attention's dtype)."""
    count = official_count(inputs.visual.numel(), keep)
    return StageChoice(keep=last_token_scores(inputs).topk(count).indices)
