"""FrameFusion in the LLM, ``variant="official"``: the release's merge and prune steps in the model's dtype.

The merge step and the budget formula are the release's pieces of
:mod:`baselines.framefusion_merge.release`; the prune step is here:

* **Pruning** (:func:`prune_choice`): head mean of the last token's attention row as
  ``torch.mean(weights[1, H, 1, S], dim=(1, 2))`` in the weights' dtype, then
  ``topk(round(n * (1 - p)))`` (Python ``round``, halves to even) over the video tokens
  (thu-nics/FrameFusion@fbec1d2 ``framefusion/main.py`` ``forward`` and ``framefusion/utils.py``
  ``scaled_dot_product_attention``, the pruning row).

What is bit-equal and what is not: :mod:`baselines.framefusion`.
"""

from __future__ import annotations

import logging
from typing import Optional

import torch

from baselines.framefusion.state import STATE_KEY, VideoState, stage_share
from baselines.framefusion_merge.release import (
    adjacent_similarity,
    merge_choice,
    merge_tokens,
    patch_major,
    pruning_ratio,
)
from vcast.models.llm_plan import StageChoice, StageInputs

logger = logging.getLogger(__name__)


def prune_count(count: int, share: float) -> int:
    """The release's ``round(n * (1 - p))`` (Python ``round``: halves to even)."""
    return round(count * (1 - share))


def prune_choice(attention: torch.Tensor, columns: torch.Tensor, share: float) -> torch.Tensor:
    """The release's pruning: indices into ``columns`` of the kept video tokens.

    Args:
        attention: [H, 1, S] the last token's attention row (the weights' dtype decides the
            head mean's arithmetic, as in the release).
        columns: LongTensor [n] the video tokens' columns (one contiguous span in the release).
        share: ``p`` from :func:`baselines.framefusion_merge.release.pruning_ratio`.
    Returns:
        LongTensor [round(n (1 - p))], ascending.
    """
    scores = torch.mean(attention[None], dim=(1, 2))[0].index_select(0, columns)
    kept = scores.topk(prune_count(columns.numel(), share)).indices
    return torch.sort(kept).values


def official_entry_state(frames: torch.Tensor, cost: float, ratio_lower_bound: float, num_layers: int,
                         original: Optional[int] = None) -> VideoState:
    """The release's state after its layer-0 merge, from the frame index of each entering token [n0].

    The stages do not see the release's state, so it is read off the counts: ``N`` = the video's
    ``T * P`` before the merge (``original``, from ``StageInputs.video_sizes``; without it,
    ``(last present frame + 1) * P`` as in :func:`baselines.framefusion.paper.entry_state`, ``P`` =
    the tokens of frame 0, never merged), ``removed = N - n0``. The release took the capped branch iff
    ``|cand| / N >= u`` (floats) and then removed ``int(u N)``; an uncapped merge removes
    ``|cand|`` with ``|cand| / N < u``. A removal of exactly ``int(u N) > 0`` is read as capped
    (it was uncapped only if exactly that many tokens were candidates). Wrong when whole trailing
    frames were merged away (``N`` too small), see :mod:`baselines.framefusion`.
    """
    total = original if original is not None else (int(frames.max()) + 1) * int((frames == 0).sum())
    removed = max(0, total - frames.numel())
    cap_share = pruning_ratio([], cost, num_layers)
    share = removed / total
    if share >= cap_share or (removed > 0 and removed == int(cap_share * total)):
        return VideoState([], True, True, total)
    return VideoState([share], share < ratio_lower_bound, False, total)


def official_choose(inputs: StageInputs, *, cost: float, threshold: float, ratio_lower_bound: float,
                    budget_layers: int) -> StageChoice:
    """One stage of the release (``variant="official"``) on one batch row: its merge step or its
    prune step in the model's dtype (:mod:`baselines.framefusion_merge.release`, :func:`prune_choice`)."""
    states: dict[int, VideoState] = inputs.state.setdefault(STATE_KEY, {})
    total = inputs.visual.numel()
    keep_parts: list[torch.Tensor] = []
    token_parts: list[torch.Tensor] = []
    changed = False
    for video in torch.unique(inputs.videos).tolist():
        local = torch.nonzero(inputs.videos == video).squeeze(1)  # indices into visual, ascending
        hidden = inputs.hidden.index_select(0, inputs.visual[local])  # [n, C], the model's dtype
        state = states.get(video)
        if state is None:
            state = states[video] = official_entry_state(inputs.frames[local], cost, ratio_lower_bound,
                                                         budget_layers, inputs.video_sizes.get(video))
        if state.finish_merging and state.finish_pruning:
            keep_parts.append(local)
            token_parts.append(hidden)
            continue
        count = local.numel()
        share = stage_share(inputs, video, state, cost, budget_layers)
        if share is None:
            changed = True
            continue
        if state.finish_merging:  # the release's pruning branch
            if inputs.attention is None:
                raise ValueError("framefusion: the pruning stage needs the last token's attention row "
                                 "(queries='last')")
            kept = prune_choice(inputs.attention, inputs.visual[local], share)
            keep_parts.append(local[kept])
            token_parts.append(hidden[kept])
            state.finish_pruning = True
            changed = changed or kept.numel() != count
            continue
        order = patch_major(inputs.frames[local], inputs.patches[local])
        ordered = hidden[order]
        choice = merge_choice(adjacent_similarity(ordered, inputs.patches[local][order]), threshold, share)
        if choice.capped:
            state.finish_merging = state.finish_pruning = True
        else:
            state.sparsity_list.append(choice.share)
            state.finish_merging = choice.share < ratio_lower_bound
        logger.debug("framefusion[official]: layer %d video %d merges %d of %d (capped %s)", inputs.layer, video,
                     int(choice.merged.sum()), count, choice.capped)
        survivors = ~choice.merged
        keep_parts.append(local[order[survivors]])
        token_parts.append(merge_tokens(ordered, choice.merged)[survivors])
        changed = changed or bool(choice.merged.any())
    if not changed:
        return StageChoice(keep=torch.arange(total, device=inputs.visual.device))
    if not keep_parts:
        return StageChoice(keep=torch.zeros(0, dtype=torch.long, device=inputs.visual.device))
    return StageChoice(keep=torch.cat(keep_parts), tokens=torch.cat(token_parts))
