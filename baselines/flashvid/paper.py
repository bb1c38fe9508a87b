"""FlashVID's in-LLM step, ``variant="paper"``: keep the ``ceil(N * llm_retention)`` video tokens
most attended by the last prompt token (decimal count, float32 scores, ties to the lower index)."""

from __future__ import annotations

from functools import partial

from baselines.common.dpc_knn import top_indices
from baselines.common.llm_scores import last_token_scores
from baselines.flashvid_merge.params import ceil_share
from vcast.models.llm_plan import LLMPlan, LLMStage, StageChoice, StageInputs


def keep_top_attention(inputs: StageInputs, retention: float) -> StageChoice:
    """FlashVID's in-LLM step: keep the ``ceil(N * retention)`` video tokens with the highest
    head-mean attention from the last prompt token (ties to the lower index)."""
    count = min(inputs.visual.numel(), ceil_share(inputs.visual.numel(), retention))
    return StageChoice(keep=top_indices(last_token_scores(inputs), count))


def paper_plan(ratio: float, *, layer: int, llm_retention: float, pre_params: dict, scores: str) -> LLMPlan:
    """``flashvid_merge`` (paper) at ``ratio`` before the LLM, :func:`keep_top_attention` before ``layer``."""
    stage = LLMStage(layer=layer, queries="last",
                     choose=partial(keep_top_attention, retention=float(llm_retention)))
    return LLMPlan(stages=(stage,), pre_method="flashvid_merge", pre_ratio=ratio, pre_params=pre_params,
                   positions="original", scores=scores)
