"""SparseVLM, ``variant="paper"``: text raters, float32 scores, recycled DPC-kNN cluster means at their centre's slot.

What it does and how it deviates from the release: :mod:`baselines.sparsevlm`.
"""

from __future__ import annotations

import math

import torch

from baselines.common.dpc_knn import (
    assign_to_centres,
    cluster_means,
    density_peak_centres,
    top_indices,
)
from baselines.sparsevlm.raters import rater_rows
from vcast.models.llm_plan import StageChoice, StageInputs

RECYCLE_SHARE = 0.3  # top 30% of the pruned tokens are recycled
CLUSTER_SIZE = 10  # one cluster per 10 recycled tokens (+1)
STATE_RATERS = "sparsevlm_raters"
STATE_TEXT = "sparsevlm_text_tokens"


def select_raters(embeddings: torch.Tensor, entry_visual: torch.Tensor, text_tokens: int) -> torch.Tensor:
    """Rater indices (relative to the text start) from the layer-0 embeddings.

    Args:
        embeddings: ``[S0, C]`` the row's layer-0 input.
        entry_visual: LongTensor ``[N0]`` video columns of ``embeddings``.
        text_tokens: ``T``: the text tokens after the (last) video.
    Returns:
        LongTensor ``[R]`` ascending, in ``[0, T)``: ``t`` with ``r_t > mean(r)``, where ``r`` is the
        visual-mean of the text-axis softmax of ``E_vis E_text^T``; every text token when none is
        above the mean.
    """
    start = int(entry_visual[-1]) + 1
    text = embeddings[start : start + text_tokens].float()
    visual = embeddings.index_select(0, entry_visual).float()
    relevance = (visual @ text.T).softmax(dim=1).mean(dim=0)  # [T]
    raters = (relevance > relevance.mean()).nonzero().squeeze(1)
    if raters.numel() == 0:
        raters = torch.arange(text_tokens, device=embeddings.device)
    return raters


def rater_scores(inputs: StageInputs) -> torch.Tensor | None:
    """float32 ``[N]``: mean over the raters of the head-mean attention to each video token (None
    without text rows). Chooses the raters at the first call of the row's prefill (kept in ``state``)."""
    if inputs.attention is None or inputs.rows.numel() == 0:
        return None
    rows = rater_rows(inputs, select_raters, STATE_RATERS, STATE_TEXT)
    attention = inputs.attention.index_select(1, rows).mean(0)  # head mean: [raters, S]
    return attention.index_select(1, inputs.visual).mean(0)


def recycle(hidden: torch.Tensor, scores: torch.Tensor, pruned: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cluster the best pruned tokens and return ``(centres, means)``.

    Args:
        hidden: ``[N, C]`` the layer-output hidden states of the video tokens present.
        scores: float32 ``[N]`` their rater scores.
        pruned: LongTensor ``[n]`` (``n >= 1``) the pruned ones (indices into the ``N``), ascending.
    Returns:
        ``centres``: LongTensor ``[c]`` indices into the ``N`` where the means go (each cluster's
        DPC-kNN centre), ``means``: float32 ``[c, C]`` unweighted cluster means, for
        ``m = floor(0.3 n) + 1`` recycled tokens and ``c = floor(m / 10) + 1`` clusters.
    """
    recycled_count = math.floor(RECYCLE_SHARE * pruned.numel()) + 1
    recycled = pruned[top_indices(scores.index_select(0, pruned), recycled_count)]  # ascending
    features = hidden.index_select(0, recycled).float()
    clusters = recycled_count // CLUSTER_SIZE + 1
    centres = density_peak_centres(features, clusters, k=clusters)
    labels = assign_to_centres(features, centres)
    return recycled[centres], cluster_means(features, labels, clusters)


def sparsevlm_choose(inputs: StageInputs, count: int, recycling: bool) -> StageChoice:
    """Keep the top ``min(count, v - 1)`` by rater attention, plus the recycled cluster means."""
    present = inputs.visual.numel()
    scores = rater_scores(inputs)
    if scores is None:  # nothing to rate with: all scores tie, the earliest tokens win
        scores = torch.zeros(present, dtype=torch.float32, device=inputs.visual.device)
    keep = top_indices(scores, min(count, present - 1))
    if not recycling:
        return StageChoice(keep=keep)
    pruned_mask = torch.ones(present, dtype=torch.bool, device=scores.device)
    pruned_mask[keep] = False
    pruned = pruned_mask.nonzero().squeeze(1)
    centres, means = recycle(inputs.hidden.index_select(0, inputs.visual), scores, pruned)
    kept_tokens = inputs.hidden.index_select(0, inputs.visual.index_select(0, keep)).float()
    return StageChoice(keep=torch.cat([keep, centres]), tokens=torch.cat([kept_tokens, means]))
