"""PruneVid ``variant="official"``: the release's stage B, ``VTPWindowCache.process_attention``
(Visual-AI/PruneVid@b12600c ``models/pllava/elastic_cache.py`` L120-154), after
``prunevid_stage_a`` ``variant="official"`` (see :mod:`baselines.prunevid`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from baselines.prunevid_stage_a.official import read_groups
from vcast.models.llm_plan import LLMPlan, LLMStage, StageChoice, StageInputs
from vcast.variants import OFFICIAL

logger = logging.getLogger(__name__)


def official_stage_b_choose(inputs: StageInputs, alpha: float) -> StageChoice:
    """The release's ``process_attention`` on one row: scores = max over heads, then over the query
    rows, in the attention's dtype; per window the top ``int(s * alpha)`` of its static outputs and,
    per frame, the top ``int(d * alpha)`` of its dynamic ones (``topk`` order; the groups read back
    from stage A's slots by :func:`baselines.prunevid_stage_a.official.read_groups`)."""
    count = inputs.visual.numel()
    if inputs.attention is None:
        logger.debug("prunevid (official): no query token after the video at layer %d; nothing dropped", inputs.layer)
        return StageChoice(keep=torch.arange(count, device=inputs.visual.device))
    scores = inputs.attention.max(dim=0)[0].max(dim=0)[0].index_select(0, inputs.visual)
    kept = [torch.zeros(0, dtype=torch.long, device=scores.device)]
    for video in torch.unique(inputs.videos).tolist():
        members = (inputs.videos == video).nonzero().squeeze(1)  # ascending columns: the release's order
        frames = inputs.frames.index_select(0, members)
        static = read_groups(frames, inputs.patches.index_select(0, members))
        for frame in torch.unique(frames).tolist():
            in_frame = frames == frame
            for group in (members[in_frame & static], members[in_frame & ~static]):
                if group.numel():
                    _, top = torch.topk(scores.index_select(0, group), k=int(group.numel() * alpha), dim=-1)
                    kept.append(group[top])
    keep = torch.sort(torch.cat(kept)).values
    logger.debug("prunevid (official): stage B at layer %d keeps %d of %d video tokens (alpha %s)", inputs.layer,
                 keep.numel(), count, alpha)
    return StageChoice(keep=keep)


def official_plan(gamma: float, alpha: float, selected_layer: int, stage_a: Mapping[str, Any],
                  seed: int) -> LLMPlan:
    """Stage A (``prunevid_stage_a`` ``variant="official"`` at ``gamma``, density noise ``seed``)
    before the LLM, then :func:`official_stage_b_choose` at the float ``alpha`` after layer
    ``selected_layer``; scores in the model's dtype as the release computes them."""
    stage = LLMStage(layer=selected_layer + 1, choose=lambda inputs: official_stage_b_choose(inputs, alpha),
                     queries="text", score_layer=selected_layer, rotary=False, causal=False)
    return LLMPlan(
        stages=(stage,), pre_method="prunevid_stage_a", pre_ratio=gamma,
        pre_params={**stage_a, "variant": OFFICIAL, "seed": seed},
        positions="original", scores="rows", score_dtype="model", score_scale="divide",
    )
