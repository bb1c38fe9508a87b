"""PruneVid ``variant="paper"``: stage B keeps the top ``floor(n_f * alpha)`` tokens of every frame by
the max-max pre-RoPE text attention, after ``prunevid_stage_a`` (see :mod:`baselines.prunevid`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import torch

from vcast.models.llm_plan import LLMPlan, LLMStage, StageChoice, StageInputs

logger = logging.getLogger(__name__)


def max_max_scores(inputs: StageInputs) -> torch.Tensor:
    """float32 ``[N]``: per video token, the max over heads and then over the query rows of
    ``inputs.attention`` [H, R, S]."""
    return inputs.attention.float().amax(dim=0).amax(dim=0).index_select(0, inputs.visual)


def group_top_share(scores: torch.Tensor, groups: torch.Tensor, alpha: Fraction) -> torch.Tensor:
    """Per group, the top ``floor(n_g * alpha)`` of ``scores`` [N] (ties to the lower index).

    Args:
        scores: float ``[N]``.
        groups: LongTensor ``[N]`` group key of each token (any integers).
        alpha: the share, exact.
    Returns:
        LongTensor ascending indices into ``scores``.
    """
    if scores.numel() == 0:
        return torch.zeros(0, dtype=torch.long, device=scores.device)
    _, group_of, sizes = torch.unique(groups, return_inverse=True, return_counts=True)
    # Exact floor(n * alpha) on the host (one number per group; n * numerator can exceed int64).
    quotas = torch.tensor([n * alpha.numerator // alpha.denominator for n in sizes.tolist()],
                          dtype=torch.long, device=scores.device)
    # Order by group, then score descending, then index: two stable sorts.
    by_score = torch.sort(scores, descending=True, stable=True).indices
    order = by_score[torch.sort(group_of[by_score], stable=True).indices]
    starts = torch.cumsum(sizes, 0) - sizes
    rank = torch.arange(order.numel(), device=scores.device) - starts[group_of[order]]
    kept = order[rank < quotas[group_of[order]]]
    return torch.sort(kept).values


def stage_b_choose(inputs: StageInputs, alpha: Fraction) -> StageChoice:
    """PruneVid stage B on one row: keep the top ``floor(n_f * alpha)`` tokens of every frame
    (per video) by the max-max pre-RoPE text attention."""
    count = inputs.visual.numel()
    if inputs.attention is None:
        logger.debug("prunevid: no query token after the video at layer %d; nothing dropped", inputs.layer)
        return StageChoice(keep=torch.arange(count, device=inputs.visual.device))
    scores = max_max_scores(inputs)
    frames_per_video = int(inputs.frames.max()) + 1 if count else 1
    groups = inputs.videos * frames_per_video + inputs.frames
    keep = group_top_share(scores, groups, alpha)
    logger.debug("prunevid: stage B at layer %d keeps %d of %d video tokens (alpha %s)", inputs.layer,
                 keep.numel(), count, alpha)
    return StageChoice(keep=keep)


def paper_plan(gamma: float, share: Fraction, selected_layer: int, stage_a: Mapping[str, Any]) -> LLMPlan:
    """Stage A (``prunevid_stage_a`` at ``gamma`` with the checked ``stage_a`` parameters) before
    the LLM, then :func:`stage_b_choose` at share ``alpha = share`` after layer ``selected_layer``."""
    stage = LLMStage(layer=selected_layer + 1, choose=lambda inputs: stage_b_choose(inputs, share),
                     queries="text", score_layer=selected_layer, rotary=False, causal=False)
    return LLMPlan(
        stages=(stage,), pre_method="prunevid_stage_a", pre_ratio=gamma,
        pre_params=dict(stage_a), positions="original", scores="rows",
    )
