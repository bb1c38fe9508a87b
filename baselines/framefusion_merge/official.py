"""FrameFusion's first merge, ``variant="official"``: the release's first ``forward`` call in the input dtype.

Built from the release's pieces in :mod:`baselines.framefusion_merge.release`; what is bit-equal
and what is not: :mod:`baselines.framefusion_merge`.
"""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from baselines.framefusion_merge.release import (
    adjacent_similarity,
    merge_choice,
    merge_tokens,
    pruning_ratio,
)
from vcast.selection import Selection

logger = logging.getLogger(__name__)


def official_merge_select(frames: torch.Tensor, ratio: float, *, threshold: float, num_layers: int) -> Selection:
    """The release's layer-0 merge on ``frames`` [T, P, D], in their dtype (see :mod:`baselines.framefusion_merge`).

    Returns the Selection of the unmerged tokens; ``tokens`` [K, D] in ``frames``' dtype.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    total = num_frames * tokens_per_frame
    device = frames.device
    # patch-major flat indices t * P + i: by patch, then frame (the release's order)
    order = torch.arange(total, device=device).view(num_frames, tokens_per_frame).t().reshape(-1)
    patch_of = torch.arange(tokens_per_frame, device=device).repeat_interleave(num_frames)
    ordered = frames.reshape(total, dim)[order]
    sims = adjacent_similarity(ordered, patch_of)
    choice = merge_choice(sims, threshold, pruning_ratio([], ratio, num_layers))
    tokens = merge_tokens(ordered, choice.merged)
    survivors = ~choice.merged
    logger.debug("framefusion_merge[official]: N=%d candidates share=%.4f capped=%s -> %d tokens", total,
                 choice.share, choice.capped, int(survivors.sum()))
    return selection_from_positions(order[survivors], num_frames, tokens_per_frame, tokens=tokens[survivors])
