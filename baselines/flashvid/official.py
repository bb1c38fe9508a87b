"""FlashVID's in-LLM step, ``variant="official"``: the release's ``fastv_prune`` choice
(Fanziyang-v/FlashVID@1d37422 L352-406) and the plan that runs it after the official vision side.

The count is the release's ``math.ceil(N * llm_retention)`` in Python floats, the choice its
``topk(count).indices.sort()`` of the head-mean last-token row in the model's dtype
(``LLMPlan.score_dtype = "model"``; the rows come from :mod:`vcast.models.attention_rows`).

Registers nothing; :mod:`baselines.flashvid.method` dispatches here.
"""

from __future__ import annotations

import math
from functools import partial

import torch

from baselines.common.llm_scores import last_token_scores
from vcast.models.llm_plan import LLMPlan, LLMStage, StageChoice, StageInputs
from vcast.variants import OFFICIAL


def official_llm_count(tokens: int, retention: float) -> int:
    """The release's in-LLM count ``math.ceil(N * llm_retention)`` (Python float product)."""
    return math.ceil(tokens * retention)


def official_top(scores: torch.Tensor, count: int) -> torch.Tensor:
    """The release's ``topk(count).indices.sort()`` on the scores [N] (its tie order)."""
    return torch.topk(scores, k=count, dim=-1).indices.sort().values


def keep_top_attention_official(inputs: StageInputs, retention: float) -> StageChoice:
    """The release's ``fastv_prune`` choice: ``math.ceil(N * retention)`` (float product) by
    ``topk`` of the head-mean last-token row in the attention's dtype, then sorted."""
    count = official_llm_count(inputs.visual.numel(), retention)
    return StageChoice(keep=official_top(last_token_scores(inputs), count))


def official_plan(ratio: float, *, layer: int, llm_retention: float, pre_params: dict, scores: str, seed: int,
                  score_scale: str) -> LLMPlan:
    """``flashvid_merge`` (official, DPC noise from ``seed``) at ``ratio`` before the LLM,
    :func:`keep_top_attention_official` before ``layer``."""
    stage = LLMStage(layer=layer, queries="last",
                     choose=partial(keep_top_attention_official, retention=float(llm_retention)))
    # The release's manual row: q k^T scaled in the model's dtype, float32 softmax rounded to the
    # model's dtype, head mean in that dtype (score_dtype="model"); LLaVA multiplies by scaling,
    # Qwen3-VL divides by sqrt(head_dim).
    return LLMPlan(stages=(stage,), pre_method="flashvid_merge", pre_ratio=ratio,
                   pre_params={**pre_params, "variant": OFFICIAL, "seed": seed}, positions="original",
                   scores=scores, score_dtype="model", score_scale=score_scale)
