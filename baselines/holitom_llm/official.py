"""HoliTom in-LLM, ``variant="official"``: the release's inner step (cokeshao/HoliTom@e9b2972,
``holitom/modeling_qwen2.py`` L120-225), in the model dtype; see :mod:`baselines.holitom_llm`."""

from __future__ import annotations

import logging

import torch

from baselines.holitom_llm.budget import inner_keep_count
from vcast.models.llm_plan import StageChoice, StageInputs

logger = logging.getLogger(__name__)


def official_merge(hidden: torch.Tensor, top: torch.Tensor, merged: torch.Tensor) -> torch.Tensor:
    """The release's inner merge, in ``hidden``'s dtype (``variant="official"``).

    Similarities ``bmm(h_j, h_t^T) / (|h_j| |h_t|)`` in the input dtype (no eps), columns in the
    order of ``top`` (the release's ``topk`` order), each merged row to ``torch.max``'s index; then
    ``h_t <- (h_t + h_j) / 2`` for the merged rows in the given order, rounding at every step. The
    loop is run by rank (the m-th merge into every kept row at once), which rounds exactly as it.

    Args:
        hidden: ``[N, C]`` the video tokens' hidden states entering layer ``K``.
        top: LongTensor ``[K]`` rows that stay, in ``topk`` order.
        merged: LongTensor ``[M]`` rows merged into them, ascending (the release's loop order).
    Returns:
        ``[K, C]`` in ``hidden``'s dtype: the rows of ``top`` (same order) after every merge.
    """
    states = hidden.clone()
    if merged.numel() == 0:
        return states.index_select(0, top)
    others = states.index_select(0, merged)[None]  # [1, M, C]
    anchors = states.index_select(0, top)[None]  # [1, K, C]
    dot = torch.bmm(others, anchors.transpose(1, 2))
    similarity = dot / (torch.norm(others, dim=-1, keepdim=True) * torch.norm(anchors, dim=-1, keepdim=True).transpose(1, 2))
    target = torch.max(similarity, dim=-1).indices[0]  # [M] into ``top``
    order = torch.sort(target, stable=True).indices
    received = torch.bincount(target, minlength=top.numel())
    starts = torch.cumsum(received, 0) - received
    rank = torch.empty_like(target)
    rank[order] = torch.arange(order.numel(), device=target.device) - starts[target[order]]
    for step in range(int(received.max())):  # loop over merge rounds, not tokens
        now = rank == step
        rows, sources = top[target[now]], merged[now]
        states[rows] = (states[rows] + states[sources]) / 2
    return states.index_select(0, top)


def official_inner_choose(inputs: StageInputs, r_inner: float) -> StageChoice:
    """The release's inner step on one row (``variant="official"``): scores = the head mean, in the
    model dtype, of the last token's attention cast to it (eager's ``softmax(float32).to(dtype)``);
    ``topk(round(N (1 - r_inner)))``; :func:`official_merge`."""
    count = inputs.visual.numel()
    keep_count = inner_keep_count(count, r_inner)
    if keep_count >= count:
        return StageChoice(keep=torch.arange(count, device=inputs.visual.device))
    probabilities = inputs.attention.to(inputs.hidden.dtype)  # [H, R, S]
    scores = torch.mean(probabilities, dim=0)[-1].index_select(0, inputs.visual)
    top = scores.topk(keep_count).indices  # the release's order: by score, its tie order
    rest = torch.ones(count, dtype=torch.bool, device=top.device)
    rest[top] = False
    merged = rest.nonzero().squeeze(1)
    tokens = official_merge(inputs.hidden.index_select(0, inputs.visual), top, merged)
    order = torch.sort(top).indices  # hand the kept rows back in sequence order
    logger.debug("holitom_llm[official]: layer %d keeps %d of %d video tokens", inputs.layer, keep_count, count)
    return StageChoice(keep=top[order], tokens=tokens[order])
