"""FrameFusion in the LLM, ``variant="paper"``: the stage's similarity merge and prune in float32.

What it does and how it deviates from the release: :mod:`baselines.framefusion`.
"""

from __future__ import annotations

import logging
import math

import torch

from baselines.common.dpc_knn import top_indices
from baselines.common.llm_scores import last_token_scores
from baselines.framefusion.state import STATE_KEY, VideoState, stage_share
from baselines.framefusion_merge.paper import merge_cap
from vcast.models.llm_plan import StageChoice, StageInputs
from vcast.temporal import cosine

logger = logging.getLogger(__name__)


def entry_state(frames: torch.Tensor, cost: float, ratio_lower_bound: float) -> VideoState:
    """The state after the layer-0 merge, from the frame index of each entering token [n0].

    Frame 0 is never merged, so its token count is P; the original count is taken as
    ``(last present frame + 1) * P`` (exact unless whole trailing frames were merged away).
    """
    per_frame = int((frames == 0).sum())
    total = (int(frames.max()) + 1) * per_frame
    removed = max(0, total - frames.numel())
    if removed >= merge_cap(cost, total):  # framefusion_merge's capped branch: budget met
        return VideoState([], True, True, total)
    first = removed / total
    return VideoState([first], first < ratio_lower_bound, False, total)


def present_similarity(hidden: torch.Tensor, frames: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
    """float32 [n]: cosine of each token to the same patch's previous present frame, ``-inf`` for
    the first present frame of each patch. ``hidden`` [n, C]; ``frames``, ``patches`` [n]."""
    count = frames.numel()
    sims = torch.full((count,), float("-inf"), dtype=torch.float32, device=hidden.device)
    if count < 2:
        return sims
    order = _patch_major(frames, patches)
    same = patches[order[1:]] == patches[order[:-1]]
    x = hidden.float()
    ordered = torch.full_like(sims, float("-inf"))
    ordered[1:] = torch.where(same, cosine(x[order[1:]], x[order[:-1]]), ordered[1:])
    sims[order] = ordered
    return sims


def _patch_major(frames: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
    """Order of the tokens by (patch, frame): LongTensor [n]."""
    key = patches.long() * (int(frames.max()) + 1) + frames.long()
    return torch.sort(key, stable=True).indices


def merge_runs(hidden: torch.Tensor, frames: torch.Tensor, patches: torch.Tensor, merged: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Collapse each run of merged tokens into the token before it (unweighted mean).

    Args:
        hidden: [n, C] the video's present tokens.
        frames, patches: [n] their frame and on-grid index.
        merged: BoolTensor [n]; never the first present frame of a patch.
    Returns:
        ``kept`` [n'] indices of the surviving tokens (ascending), ``grown`` [g] those that absorbed
        a run (ascending) and ``means`` [g, C] float32 their new hidden states.
    """
    count = frames.numel()
    device = hidden.device
    order = _patch_major(frames, patches)
    place = torch.arange(count, device=device)
    # The latest unmerged token at or before each one in (patch, frame) order; each patch's first
    # token is unmerged, so the running maximum never crosses into the previous patch.
    anchor_place = torch.cummax(torch.where(merged[order], torch.zeros_like(place), place), dim=0).values
    anchor = torch.empty_like(place)
    anchor[order] = order[anchor_place]
    sizes = torch.bincount(anchor, minlength=count)
    kept = torch.nonzero(~merged).squeeze(1)
    grown = torch.nonzero(sizes > 1).squeeze(1)
    # Only the runs are touched: each grown anchor's own state plus its run members.
    slot = torch.full((count,), -1, dtype=torch.long, device=device)
    slot[grown] = torch.arange(grown.numel(), device=device)
    members = torch.nonzero(merged).squeeze(1)
    sums = hidden.index_select(0, grown).float().index_add_(0, slot[anchor[members]],
                                                            hidden.index_select(0, members).float())
    means = sums / sizes[grown, None].to(sums.dtype)
    return kept, grown, means


def framefusion_choose(inputs: StageInputs, *, cost: float, threshold: float, ratio_lower_bound: float,
                       budget_layers: int | None = None) -> StageChoice:
    """One FrameFusion stage on one batch row (see :mod:`baselines.framefusion`); ``budget_layers`` is the
    budget formula's ``L`` (None: the model's depth)."""
    states: dict[int, VideoState] = inputs.state.setdefault(STATE_KEY, {})
    num_layers = inputs.num_layers if budget_layers is None else budget_layers
    total = inputs.visual.numel()
    keep_parts: list[torch.Tensor] = []
    updates: list[tuple[torch.Tensor, torch.Tensor]] = []
    changed = False
    scores: torch.Tensor | None = None
    for video in torch.unique(inputs.videos).tolist():
        local = torch.nonzero(inputs.videos == video).squeeze(1)  # indices into visual, ascending
        state = states.get(video)
        if state is None:  # the first stage sees the tokens as the layer-0 merge left them
            state = states[video] = entry_state(inputs.frames[local], cost, ratio_lower_bound)
        if state.finish_merging and state.finish_pruning:
            keep_parts.append(local)
            continue
        count = local.numel()
        share = stage_share(inputs, video, state, cost, num_layers)
        if share is None:
            changed = True
            continue
        if state.finish_merging:  # the pruning step
            if inputs.attention is None:
                raise ValueError("framefusion: the pruning stage needs the last token's attention row "
                                 "(queries='last')")
            if scores is None:
                scores = last_token_scores(inputs)
            kept = top_indices(scores[local], round(count * (1.0 - share)))
            keep_parts.append(local[kept])
            state.finish_pruning = True
            changed = changed or kept.numel() != count
            logger.debug("framefusion: layer %d video %d pruned %d -> %d (p=%.4f)", inputs.layer, video, count,
                         kept.numel(), share)
            continue
        # The similarity merge.
        frames, patches = inputs.frames[local], inputs.patches[local]
        hidden = inputs.hidden.index_select(0, inputs.visual[local])
        sims = present_similarity(hidden, frames, patches)
        candidate = sims >= threshold
        num_candidates = int(candidate.sum())
        cap = math.floor(share * count)
        if num_candidates >= cap:  # the budget is met by merging: no pruning afterwards
            merged = torch.zeros_like(candidate)
            merged[torch.sort(sims, descending=True, stable=True).indices[:cap]] = True
            state.finish_merging = state.finish_pruning = True
        else:
            merged = candidate
            step = num_candidates / count
            state.sparsity_list.append(step)
            state.finish_merging = step < ratio_lower_bound
        logger.debug("framefusion: layer %d video %d merges %d of %d (candidates %d, cap %d)", inputs.layer, video,
                     int(merged.sum()), count, num_candidates, cap)
        if not bool(merged.any()):
            keep_parts.append(local)
            continue
        kept, grown, means = merge_runs(hidden, frames, patches, merged)
        keep_parts.append(local[kept])
        updates.append((local[grown], means))
        changed = True
    if not changed:
        return StageChoice(keep=torch.arange(total, device=inputs.visual.device))
    keep = (torch.cat(keep_parts) if keep_parts
            else torch.zeros(0, dtype=torch.long, device=inputs.visual.device))
    if not updates:
        return StageChoice(keep=keep)
    tokens = inputs.hidden.index_select(0, inputs.visual[keep]).float()
    row_of = torch.full((total,), -1, dtype=torch.long, device=keep.device)
    row_of[keep] = torch.arange(keep.numel(), device=keep.device)
    for indices, means in updates:
        tokens[row_of[indices]] = means
    return StageChoice(keep=keep, tokens=tokens)
