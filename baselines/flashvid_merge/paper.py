"""FlashVID's vision side, ``variant="paper"``: ADTS selection, tree merge and spatial DPC-kNN, in float32.

Algorithm on ``frames`` [T, P, D] (every score in float32), ratio ``r`` = FlashVID's
``retention_ratio``:

1. Budget per frame ``b = ceil(P * r * expansion)`` (capped at P), of which ``A = ceil(b * alpha)``
   are ADTS tokens and ``S = b - A`` are spatio-temporal (STTM) tokens.
2. Segmentation: frame features = token means, L2-normalised; ``s_t = <f_t, f_t+1>``; a cut after
   frame t where ``s_t < segment_threshold``; with fewer than ``min_segment_num`` segments the
   lowest ``s_t`` among the remaining transitions become extra cuts.
3. ADTS per frame: ``D_ij = 1 - cos(x_i, x_j)`` scaled column-wise by ``w_j`` (``"attn_div"``: the
   vision attention ``a_j``; ``"attn_div_v2"``: ``a_j * rel_j`` with ``rel_j`` = mean over the
   segment's frames c of the raw dot product ``<x_j, mean token of frame c>``). Greedy max-min:
   the first pick maximises the column's second-smallest entry (nearest-neighbour distance),
   then each pick maximises ``min_{i in picked} D_ij`` over the unpicked tokens.
4. TSTM per segment of ``L > 1`` frames, over the non-ADTS tokens: each token of frame t >= 1
   points to its most cosine-similar non-ADTS token of frame t - 1 and merges into it iff that
   cosine > ``temporal_threshold``. Lower bound: if fewer than ``b * L`` tokens (ADTS and all of
   frame 0 included) would stay, only the tokens whose similarity exceeds the
   ``(L * P - b * L)``-th largest similarity (but at least ``-1 + 1e-6``) merge. Trees are
   accumulated from the last frame to the first; a root's token is the **true mean** of its tree
   (the paper's temporal average; not the release's ``sum / (1 + direct children)``) and it keeps
   its own position (the earliest frame of the tree).
5. Spatial DPC-kNN per segment: with ``N`` roots and ``S * L`` STTM tokens, if ``N > S * L``
   each frame with ``n_t`` roots keeps ``c_t = ceil(n_t * S * L / N)`` DPC-kNN clusters of its
   roots (``k = min(c_t, 7)``; every root joins the nearest centre, Euclidean); the token is the
   plain mean of the cluster and takes the centre's position. Otherwise every root stays.
6. Output sorted by position; ADTS tokens are the input tokens, the others merged ([K, D] float32).

Kept count (``paper``; the official definition, not ``floor(r T P)``): per segment ``A * L`` ADTS
tokens plus ``sum_t c_t`` (or ``N`` when ``N <= S * L``; 0 when ``S = 0``). The lower bound leaves
``N >= S * L`` roots, so a segment of ``L`` frames keeps between ``b * L`` and ``b * L + L - 1``
(the ceil surplus of ``sum_t c_t``) and a single-frame segment exactly ``b``:
``T * b <= K <= T * b + T - #segments``, and ``K = T * b`` when every frame is its own segment
(e.g. T = 1, or T <= min_segment_num). (``official``: single-frame segments keep ``A`` plus
``ceil(P * (S / P))`` cluster tokens, before index collisions are removed.)

Deliberate deviations of ``variant="paper"`` from the official code (``official`` has none but
the index collisions and the refusals where the release fails, :mod:`baselines.flashvid_merge`):

* tree merge: a root is the true mean of its tree; the release adds each merged token's whole
  accumulated sum into its parent but 1 per direct child to the parent's count, so a root holds
  ``sum / (1 + direct children)`` (1.5x the mean for a 3-frame chain), which changes merged
  values, then cluster centres, in every multi-frame segment with a chain;
* single-frame segments: the official code clusters all P tokens of the frame, ADTS ones
  included, so a cluster centre can take the position of an ADTS token (two outputs at one
  place). Here their roots are the non-ADTS tokens, as in longer segments: the same count
  ``A + S = b``, no shared position;
* ``attn_div_v2`` excludes already picked tokens from later picks (the official v2 does not mask
  them and can pick a token twice, e.g. when ``rel_j < 0``; v1 masks them with -1, here -inf); the
  official ``x 1e6`` attention scale is dropped (it only mattered against that -1);
* counts use the exact decimal values: ``ceil(P * r * expansion)``, ``ceil(b * alpha)``,
  ``ceil(N * llm_retention)`` on the decimal values as written, and ``c_t`` in integers
  (the official float products can add one: ``100 * 0.28 * 1.25 = 35.00000000000001 -> 36``,
  ``100 * 0.07 = 7.000000000000001 -> 8``);
* ``b`` is capped at P (the official code fails for ``P * r * expansion > P``, i.e. r > 0.8, in
  every multi-frame segment);
* extra segmentation cuts are taken among the transitions that are not cuts yet (the official
  top-k can re-pick an existing cut and build an empty segment when ``min_segment_num > T``);
* DPC-kNN without the ``rand * 1e-6`` density noise (:mod:`baselines.common.dpc_knn`: density ties to
  the lower index; the densest token's distance is its own farthest neighbour where the official
  code takes the largest distance of the frame); every other tie goes to the lower index;
* everything is computed in float32 (the official segmentation, tree merge and cluster means run
  in the model dtype, in place; its ADTS and DPC distances upcast) and zero vectors get cosine 0
  instead of NaN; ``temporal_threshold = 1`` merges nothing (the official code skips the step and
  then divides by zero).
"""

from __future__ import annotations

import itertools
import logging
import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from baselines.common.dpc_knn import assign_to_centres, cluster_means, density_peak_centres
from baselines.common.selection_output import selection_from_positions
from baselines.flashvid_merge.params import ceil_share
from vcast.selection import Selection

logger = logging.getLogger(__name__)

DPC_MAX_K = 7  # official k = min(clusters, 7)


def frame_budget(tokens_per_frame: int, ratio: float, expansion: float, alpha: float) -> tuple[int, int, int]:
    """``(b, A, S)``: tokens per frame ``b = min(ceil(P r expansion), P)``, ADTS ``A = ceil(b alpha)``
    and STTM ``S = b - A``."""
    exact = Fraction(repr(float(ratio))) * Fraction(repr(float(expansion))) * tokens_per_frame
    budget = min(math.ceil(exact), tokens_per_frame)
    adts = ceil_share(budget, alpha)
    return budget, adts, budget - adts


def _cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``[..., n, D] x [..., m, D] -> [..., n, m]`` cosine similarities (zero vectors give 0)."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).transpose(-1, -2)


def segment_lengths(frame_features: torch.Tensor, threshold: float, min_segment_num: int) -> list[int]:
    """Segment lengths (summing to T) from the frame features ``[T, D]`` (token means).

    A cut after frame t where the cosine of frames t and t + 1 is below ``threshold``; if that
    gives fewer than ``min_segment_num`` segments, the lowest-similarity transitions that are not
    cuts yet are cut too (ties to the earlier transition).
    """
    num_frames = frame_features.shape[0]
    if num_frames == 1:
        return [1]
    normed = F.normalize(frame_features.float(), dim=-1)
    similarity = (normed[:-1] * normed[1:]).sum(-1)  # [T-1]
    cut = similarity < threshold
    missing = min_segment_num - (int(cut.sum()) + 1)
    if missing > 0:
        # Existing cuts go last so that they are never picked twice (official: set to 1.0).
        candidates = similarity.masked_fill(cut, float("inf"))
        extra = torch.sort(candidates, stable=True).indices[: min(missing, int((~cut).sum()))]
        cut[extra] = True
    bounds = [-1, *torch.nonzero(cut).flatten().tolist(), num_frames - 1]
    return [end - start for start, end in itertools.pairwise(bounds)]


def event_relevance(features: torch.Tensor) -> torch.Tensor:
    """``attn_div_v2``'s ``rel`` [L, P] of a segment ``[L, P, D]``: each token's raw dot product with
    the mean token of every frame of the segment, averaged over those frames."""
    features = features.float()
    return (features @ features.mean(1).T).mean(-1)


def adts_select(features: torch.Tensor, weights: torch.Tensor, count: int) -> torch.Tensor:
    """Greedy max-min ADTS picks of each frame: ``features`` [F, P, D], column weights [F, P] ->
    LongTensor [F, count], ascending per frame.

    ``D_ij = (1 - cos(x_i, x_j)) * w_j``; the first pick maximises the second-smallest entry of its
    column, each next pick maximises ``min_{i picked} D_ij`` over the unpicked tokens (ties to
    the lower index).
    """
    num, tokens, _ = features.shape
    picks = torch.zeros(num, count, dtype=torch.long, device=features.device)
    if count == 0:
        return picks
    distance = (1.0 - _cosine_matrix(features.float(), features.float())) * weights[:, None, :].float()
    if tokens >= 2:
        first = torch.topk(distance, 2, dim=1, largest=False).values[:, 1, :]  # nearest-neighbour distance
    else:
        first = distance[:, 0, :]
    rows = torch.arange(num, device=features.device)
    pick = first.argmax(-1)  # argmax returns the first maximum
    picked = torch.zeros(num, tokens, dtype=torch.bool, device=features.device)
    nearest = distance[rows, pick]  # [F, P] min distance to the picked set
    for step in range(count):
        if step:
            pick = nearest.masked_fill(picked, float("-inf")).argmax(-1)
            nearest = torch.minimum(nearest, distance[rows, pick])
        picks[:, step] = pick
        picked[rows, pick] = True
    return torch.sort(picks, dim=1).values


def temporal_trees(features: torch.Tensor, free: torch.Tensor, threshold: float,
                   lower_bound: int) -> tuple[torch.Tensor, torch.Tensor]:
    """TSTM of one segment: ``features`` [L, P, D] float32, ``free`` [L, P] (not ADTS) ->
    ``roots`` [L, P] bool (free tokens not merged into the previous frame) and ``means``
    [L, P, D] (a root's row is the mean of its tree).

    ``lower_bound``: ``b * L``, the fewest tokens (ADTS and frame 0 included) the merge may leave.
    """
    num_frames, tokens, _ = features.shape
    similarity = _cosine_matrix(features[1:], features[:-1])  # [L-1, P (frame t), P (frame t-1)]
    similarity = similarity.masked_fill(~free[1:, :, None], -1.0).masked_fill(~free[:-1, None, :], -1.0)
    best, parent = similarity.max(dim=-1)  # first maximum on ties
    best = torch.cat([best.new_full((1, tokens), -1.0), best])
    parent = torch.cat([parent.new_zeros((1, tokens)), parent])
    merge = best > threshold
    if int((~merge).sum()) < lower_bound:
        excess = num_frames * tokens - lower_bound  # the most tokens that may merge
        if excess > 0:
            soft = torch.sort(best.flatten(), descending=True).values[excess - 1].clamp_min(-1.0 + 1e-6)
            merge = best > soft
        else:
            merge = torch.zeros_like(merge)
    merge &= free
    sums = features.clone()
    counts = torch.ones(num_frames, tokens, device=features.device)
    for t in range(num_frames - 1, 0, -1):  # last to first: a child's sum is complete when it moves up
        moving = merge[t].to(sums.dtype)
        sums[t - 1].index_add_(0, parent[t], sums[t] * moving[:, None])
        counts[t - 1].index_add_(0, parent[t], counts[t] * moving)
    return free & ~merge, sums / counts[..., None]


def _spatial_merge(means: torch.Tensor, roots: torch.Tensor, target: int, first_position: int,
                   tokens_per_frame: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """DPC-kNN of each frame's roots down to ``ceil(n_t * target / N)`` clusters (when the segment
    has ``N > target`` roots). Returns the positions and tokens of the outputs, per frame."""
    counts = roots.sum(1).tolist()
    total = sum(counts)
    positions, tokens = [], []
    for t, count in enumerate(counts):
        if count == 0:
            continue
        index = torch.nonzero(roots[t]).flatten()
        members = means[t].index_select(0, index)
        clusters = -(-count * target // total) if total > target else count  # exact ceil
        if clusters < count:
            centres = density_peak_centres(members, clusters, k=min(clusters, DPC_MAX_K))
            labels = assign_to_centres(members, centres)
            members = cluster_means(members, labels, clusters)
            index = index.index_select(0, centres)
        positions.append(first_position + t * tokens_per_frame + index)
        tokens.append(members)
    return positions, tokens


def paper_merge(frames: torch.Tensor, ratio: float, attention: torch.Tensor, *, selection: str, alpha: float,
                expansion: float, segment_threshold: float, min_segment_num: int,
                temporal_threshold: float) -> Selection:
    """``variant="paper"`` on ``frames`` [T, P, D] with the vision ``attention`` [T, P]; see the
    module docstring.

    Returns:
        Selection with ``tokens`` [K, D] float32 (ADTS tokens unchanged, tree / cluster merges at
        their root's / centre's position); K follows the official per-frame ceil rule.
    """
    num_frames, tokens_per_frame, _ = frames.shape
    features = frames.float()
    budget, adts, sttm = frame_budget(tokens_per_frame, ratio, expansion, alpha)
    lengths = segment_lengths(features.mean(1), segment_threshold, min_segment_num)
    starts = [sum(lengths[:i]) for i in range(len(lengths))]

    weights = attention
    if selection == "attn_div_v2":
        weights = torch.cat([attention[s:s + n] * event_relevance(features[s:s + n])
                             for s, n in zip(starts, lengths)])
    picks = adts_select(features, weights, adts)  # [T, A]
    free = torch.ones(num_frames, tokens_per_frame, dtype=torch.bool, device=frames.device)
    free.scatter_(1, picks, False)
    offsets = torch.arange(num_frames, device=frames.device)[:, None] * tokens_per_frame
    positions = [(offsets + picks).flatten()]
    tokens = [features.gather(1, picks[..., None].expand(-1, -1, features.shape[-1])).flatten(0, 1)]

    if sttm > 0:
        for start, length in zip(starts, lengths):
            segment, segment_free = features[start:start + length], free[start:start + length]
            if length > 1:
                roots, means = temporal_trees(segment, segment_free, temporal_threshold, budget * length)
            else:
                roots, means = segment_free, segment  # see the module docstring (single-frame quirk)
            merged_positions, merged_tokens = _spatial_merge(means, roots, sttm * length,
                                                             start * tokens_per_frame, tokens_per_frame)
            positions += merged_positions
            tokens += merged_tokens
    positions, tokens = torch.cat(positions), torch.cat(tokens)
    logger.debug("flashvid_merge: segments %s, per frame b=%d (ADTS %d, STTM %d), kept %d of %d", lengths,
                 budget, adts, sttm, positions.numel(), num_frames * tokens_per_frame)
    return selection_from_positions(positions, num_frames, tokens_per_frame, tokens=tokens)
