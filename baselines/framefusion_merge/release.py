"""FrameFusion's released merge step and budget formula, in the model's dtype (used by both
``framefusion_merge`` and ``framefusion``, ``variant="official"``).

Official code followed: thu-nics/FrameFusion@fbec1d2 ``framefusion/main.py`` (``forward`` L44-138,
``compute_similarity_and_token_index_by_patch`` L180-241, ``merge_tokens_and_get_mask``
L243-319, ``_compute_pruning_ratio`` L321-343, ``cosine_similarity`` and
``find_contigious_latter_index``). Written from that reading, not copied. The release's prune
step is in :mod:`baselines.framefusion.official`.

The pieces, for the present tokens of one video (``n`` of them), as the release computes them:

* **Order.** The tokens are taken patch-major: by on-grid patch, then by sequence (= frame)
  order (the release's ``torch.where(patch_type == arange(P)[:, None])``).
* **Similarity** (:func:`adjacent_similarity`), in the tokens' dtype: ``sum(a * b) / (|a| |b|)``
  between each token and the one before it in that order (``torch.sum`` of the elementwise
  product, ``torch.norm``, the product of the norms and the quotient each rounded to the dtype;
  no epsilon: a zero vector gives NaN), then ``-2`` for the first token of each patch.
* **Which tokens merge** (:func:`merge_choice`): candidates ``sim >= S_th`` (the comparison with
  the Python threshold happens in the tokens' dtype: torch casts the scalar, so in bf16 ``S_th``
  is first rounded to bf16); ``a = |cand| / n`` (float). If ``a < u`` (floats; ``u`` is
  :func:`pruning_ratio`) every candidate merges and ``a`` is appended to the sparsity list,
  merging finishing when ``a < ratio_lower_bound``; otherwise only
  ``topk(sim, int(u * n))`` (``torch.topk``, its own tie order; NaN ranks highest) merges and
  merging and pruning both finish.
* **Merge arithmetic** (:func:`merge_tokens`): a run of merged tokens along a patch collapses into
  the token before it; that anchor accumulates its members one by one in frame order, each
  addition rounded to the dtype (the release's ``index_add_``), and is then divided by
  ``k + 1`` in the dtype. Run lengths are exact up to 256 frames (the release stores them in the
  hidden dtype; longer bf16 runs would round).
* **Budget** (:func:`pruning_ratio`): ``_compute_pruning_ratio`` with the same float operations;
  the release hard-codes ``num_layers = 28`` (:data:`RELEASE_BUDGET_LAYERS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

# The release both FrameFusion methods follow (their facts).
RELEASE = "thu-nics/FrameFusion@fbec1d2 framefusion/main.py forward"
RELEASE_BUDGET_LAYERS = 28  # _compute_pruning_ratio's default num_layers (Qwen2-7B's depth)
FIRST_OF_PATCH = -2.0  # the release's IGNORE_TOKEN similarity: never a candidate


def pruning_ratio(sparsity_list: Sequence[float], cost: float, num_layers: int) -> float:
    """FrameFusion's ``_compute_pruning_ratio`` (same float operations, ``num_layers`` given).

    Returns the share ``p`` of the current video tokens the next step must remove so that the
    layer-averaged share equals ``cost``: ``1 - (L cost - used) / ((L - |list|) s_last)``, 0 when
    that keep share exceeds 1, with ``s_j = prod_{i<=j} (1 - a_i)`` and ``used = sum_j s_j``.
    Raises ValueError("The cost is too small ...") when ``used > L cost`` (or no layer is left).
    """
    remaining_share = 1.0
    used = 0.0
    for sparsity in sparsity_list:
        remaining_share *= 1.0 - sparsity
        used += remaining_share
    remain = num_layers * cost - used
    if remain < 0:
        raise ValueError(f"The cost is too small: cost {cost} over {num_layers} layers is {num_layers * cost:.4f} "
                         f"layer-shares, the merges so far already used {used:.4f}")
    steps_left = num_layers - len(sparsity_list)
    if steps_left <= 0 or remaining_share <= 0:
        raise ValueError(f"The cost is too small: no layer is left after {len(sparsity_list)} merge steps of "
                         f"{num_layers}")
    keep = remain / (steps_left * remaining_share)
    return 0.0 if keep > 1 else 1.0 - keep


def patch_major(frames: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
    """LongTensor [n]: the tokens ordered by (patch, frame), the release's merge order.
    ``frames``, ``patches`` [n] (one video; its sequence order is frame order)."""
    key = patches.long() * (int(frames.max()) + 1) + frames.long()
    return torch.sort(key, stable=True).indices


def adjacent_similarity(ordered: torch.Tensor, patch_of: torch.Tensor) -> torch.Tensor:
    """[n] in ``ordered``'s dtype: the release's cosine of each token to the previous one of its
    patch, ``-2`` for the first token of each patch.

    Args:
        ordered: [n, C] the tokens in patch-major order (:func:`patch_major`).
        patch_of: [n] their patch, non-decreasing.
    """
    count = ordered.shape[0]
    first = torch.full((1,), FIRST_OF_PATCH, dtype=ordered.dtype, device=ordered.device)
    if count < 2:
        return first.expand(count).clone()
    left, right = ordered[None, :-1], ordered[None, 1:]  # [1, n - 1, C], the release's batch-1 shape
    dot = torch.sum(left * right, dim=-1)
    sims = (dot / (torch.norm(left, dim=-1) * torch.norm(right, dim=-1)))[0]
    sims[patch_of[:-1] != patch_of[1:]] = FIRST_OF_PATCH
    return torch.cat([first, sims])


@dataclass(frozen=True)
class MergeChoice:
    """What one release merge step decides for ``n`` tokens.

    Attributes:
        merged: BoolTensor [n] in patch-major order.
        capped: the ``a >= u`` branch (only the ``int(u n)`` most similar merge; merging and
            pruning both finish).
        share: ``a = |candidates| / n``, the sparsity-list entry of the uncapped branch.
    """

    merged: torch.Tensor
    capped: bool
    share: float


def merge_choice(sims: torch.Tensor, threshold: float, cap_share: float) -> MergeChoice:
    """The release's choice of merged tokens from ``sims`` [n] (patch-major, :func:`adjacent_similarity`)
    with ``S_th = threshold`` and ``u = cap_share`` (:func:`pruning_ratio`)."""
    count = sims.numel()
    candidates = torch.where(sims[None] >= threshold)[1]  # the comparison in sims' dtype
    share = candidates.shape[0] / count
    merged = torch.zeros(count, dtype=torch.bool, device=sims.device)
    if share < cap_share:
        merged[candidates] = True
        return MergeChoice(merged, False, share)
    chosen = torch.topk(sims[None], int(cap_share * count)).indices[0]
    merged[chosen] = True
    return MergeChoice(merged, True, share)


def merge_tokens(ordered: torch.Tensor, merged: torch.Tensor) -> torch.Tensor:
    """The release's merge arithmetic on [n, C] patch-major tokens (in their dtype).

    Each run of ``merged`` tokens collapses into the token before it: that anchor adds its
    members one at a time in order (each sum rounded to the dtype), then divides by ``k + 1``.
    ``merged`` [n] must be False for each patch's first token. Returns [n, C]: the anchors'
    new values, every other row unchanged (the merged rows are dropped by the caller).
    """
    count = merged.numel()
    if not bool(merged.any()):
        return ordered
    place = torch.arange(count, device=merged.device)
    anchor = torch.cummax(torch.where(merged, torch.zeros_like(place), place), dim=0).values
    depth = place - anchor  # 1..k along a run, 0 for unmerged tokens
    out = ordered.clone()
    for step in range(1, int(depth.max()) + 1):  # one member per anchor per step: the release's add order
        members = torch.nonzero(merged & (depth == step)).squeeze(1)
        targets = anchor[members]
        out[targets] = out[targets] + ordered[members]
    sizes = torch.bincount(anchor, minlength=count)
    grown = torch.nonzero(sizes > 1).squeeze(1)
    out[grown] = out[grown] / sizes[grown, None].to(out.dtype)
    return out
