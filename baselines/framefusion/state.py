"""FrameFusion's per-video state between the stages of one prefill, and the budget each stage reads from it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from baselines.framefusion_merge.release import pruning_ratio
from vcast.models.llm_plan import StageInputs

logger = logging.getLogger(__name__)

STATE_KEY = "framefusion"  # inputs.state[STATE_KEY][video] -> VideoState


@dataclass
class VideoState:
    """FrameFusion's per-video state between the stages of one prefill.

    Attributes:
        sparsity_list: share of the then-present tokens each merge step removed.
        finish_merging: no more similarity merges.
        finish_pruning: the pruning step ran (or is not needed).
        original_tokens: the video's token count before the layer-0 merge (as reconstructed).
    """

    sparsity_list: list[float] = field(default_factory=list)
    finish_merging: bool = False
    finish_pruning: bool = False
    original_tokens: int = 0


def stage_share(inputs: StageInputs, video: int, state: VideoState, cost: float, num_layers: int) -> float | None:
    """This stage's share of ``video`` (the budget formula), or None when its budget is exhausted:
    then the video is finished and its tokens dropped (both variants; the release raises)."""
    try:
        return pruning_ratio(state.sparsity_list, cost, num_layers)
    except ValueError as error:
        logger.warning("framefusion: at layer %d video %d has exhausted its budget (%s); its video tokens are all "
                       "dropped (the official raises here)", inputs.layer, video, error)
        state.finish_merging = state.finish_pruning = True
        return None
