"""PDrop, ``variant="official"``: the count and ``topk`` of Cooperx521/PyramidDrop@6444f30
``pdrop_rank_drop``, scores in the model's dtype.

What is bit-equal and what is not: :mod:`baselines.pdrop`.
"""

from __future__ import annotations

from collections.abc import Sequence

from baselines.common.dpc_knn import top_indices
from vcast.models.llm_plan import StageChoice, StageInputs


def official_count(entry_tokens: int, share: float) -> int:
    """The release's ``int(N0 * ratio)`` (truncation, may be 0)."""
    return int(entry_tokens * share)


def official_choose(inputs: StageInputs, shares: Sequence[float]) -> StageChoice:
    """The release's stage: ``topk(int(N0 * shares[i]))`` of the head-mean, row-mean attention (in its dtype)."""
    count = min(inputs.visual.numel(), official_count(inputs.entry_tokens, shares[inputs.stage]))
    if inputs.attention is None:
        return StageChoice(keep=top_indices(inputs.visual.new_zeros(inputs.visual.numel()).float(), count))
    per_key = inputs.attention.mean(0)  # [R, S]: mean over heads, in the attention's dtype
    scores = per_key.index_select(1, inputs.visual).mean(0)  # [N]: mean over the query row(s)
    return StageChoice(keep=scores.topk(count).indices)
