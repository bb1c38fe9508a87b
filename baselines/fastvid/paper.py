"""FastVID ``variant="paper"``: the clean reading's algorithm (DySeg, budgets, ATS, density peaks, DTM).

Algorithm (per video, tokens ``frames`` [T, P, D]):

1. **DySeg** (:mod:`baselines.fastvid.dyseg`): segments of consecutive frames, cut after the ``c - 1``
   lowest consecutive-frame cosines and after every transition with cosine ``< tau``.
2. **Budgets.** ``B = floor(r T P)`` is split over the segments in proportion to their length
   (exact largest remainder, ties to the earlier segment). In a segment of ``L`` frames with
   budget ``b``: context ``C = floor(b d)``, salient ``S = b - C``. The salient tokens are spread
   evenly over the frames (remainder to the first frames); the context tokens over the
   ``ceil(L / p)`` anchor frames (the last frame and every ``p``-th frame counted back from it;
   remainder to the anchor frames in that order, i.e. the last frame first, as the official
   list reversal does).
3. **ATS**: in every frame the top-``S_t`` tokens by ``vision_attention`` are kept as they are.
4. **Density peaks**: in an anchor frame with ``C_t`` context tokens, DPC-kNN (``k = dpc_k``) over
   its non-salient tokens; the anchors are the top-``C_t`` scores.
5. **DTM**: for each anchor frame independently, every non-salient token of the segment that is
   not one of *this* frame's anchors (other anchor frames' anchors included, as in the official
   code) joins the most cosine-similar of this frame's anchors; the anchor becomes
   ``w x_a + (1 - w) mean(assigned)`` with ``w = max(1 / (n_a + 1), beta)`` (``x_a`` if none joined).

Cost: step 5 is where the time goes on long segments. Each of a segment's ``ceil(L / p)`` anchor
frames compares the segment's whole non-salient pool (``m``, about ``L P (1 - r (1 - d))`` tokens)
with its ``n`` anchors, so a segment costs about ``L^2 P n D / p`` multiply-adds: quadratic in the
segment length by the algorithm's definition (the official loop does the same), and with DySeg a
longer clip of the same video has longer segments. The pool and its normalisation are built once
per segment (:func:`merge_from_pool`); per anchor frame there is one gather of the pool's unit
rows, one ``[m - n, D] x [D, n]`` product and one pass of sums. (Copying and re-normalising the
pool for every anchor frame, as an earlier version did, gives bit-equal results in about 1.5x the
time.)

Default hyper-parameters (LLaVA official, ``llava_onevision.py`` L88-93 and ``scripts/eval.sh``):
``c = 8``, ``tau = 0.9``, ``d = 0.4``, ``p = 4``, ``beta = 0.6``, DPC ``k = 4``; the official scripts
change only the retention ratio (0.10 by default), so the same values are used at every ratio.
The Qwen2.5-VL scripts use ``tau = 0.84`` (and ``r = 0.27``); pass ``segment_threshold=0.84`` there.

Model inputs: ``vision_attention`` [T, P] (the attention each token received in the vision
encoder's feature layer, column mean over heads and queries, pooled onto the token grid) is the
ATS saliency. The segmentation feature is the L2-normalised per-frame mean of the tokens.

Output and positions: a merging method. Salient tokens keep their own positions and values;
each merged anchor takes its anchor token's position (anchors are chosen among the frame's
non-salient tokens, so no two outputs share a position). Exactly ``B`` tokens are returned.

Deliberate deviations from the official code:

* **Budget.** Exactly ``B = floor(r T P)`` tokens, apportioned to segments by length. The
  LLaVA-OneVision version keeps ``R = floor(P r)`` per frame with a per-frame salient/context
  split (``S = R - floor(R d)``, each anchor frame ``floor(floor(R d) L / ceil(L / p))``), and
  LLaVA-Video uses ``seg_retain = R L``; both keep fewer than ``B`` (e.g. 19 instead of 19.6 per
  frame at P = 196, r = 0.1). The per-segment split itself is LLaVA-Video's
  (``fastvid_llavavideo/.../modeling_qwen2.py`` L893-1091).
* **Context quota larger than the pool** (only at high ratios): an anchor frame cannot take more
  context tokens than it has non-salient tokens. The shortfall goes first to the segment's other
  anchor frames with room (in anchor order), then to extra salient tokens on frames with room (in
  frame order). The official code never meets this case at its ratios.
* **Saliency.** ``vision_attention`` (column mean of the feature layer's attention) replaces the
  SigLIP MAP-head probe attention (LLaVA) and the mean-query attention of the last ViT block
  (Qwen2.5-VL).
* **Segmentation feature.** The per-frame token mean (as FastVID's Qwen2.5-VL code does) for every
  model. The LLaVA code uses the SigLIP MAP-head pooled embedding, which the Hugging Face
  LLaVA-OneVision vision tower does not have (it drops the head).
* **Determinism.** No ``torch.rand * 1e-6`` density noise: DPC ties are broken by index
  (:mod:`baselines.common.dpc_knn`); salient and anchor ties go to the lower token index; DySeg ties to
  the earlier transition; guard ``k = min(c - 1, T - 1)`` for short videos (see :mod:`baselines.fastvid.dyseg`).
* **Single-frame segments** use the same DTM rule as longer ones (the LLaVA-Video loop: the pool
  excludes the anchors); the LLaVA-OneVision version (its per-frame merge,
  ``modeling_qwen2.py`` L900-1075) also assigns the anchors to themselves.
* **Qwen2.5-VL extras not reproduced:** the ``DySeg_ignore = 0.95`` sub-segmentation that gives
  near-duplicate frames no tokens, the ``max(floor(b d), 1)`` context floor and the ``P // 2`` cap.
* Scores and merges in float32 whatever the input dtype (the official merge runs in bf16);
  cosines use a 1e-12 norm floor (the official normalisation divides by the raw norm).
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import torch

from baselines.common.dpc_knn import density_peak_scores, top_indices
from baselines.common.model_inputs import vision_attention_input
from baselines.common.selection_output import selection_from_positions
from baselines.fastvid.dyseg import dyseg
from vcast.allocation import allocate_paper
from vcast.budget import paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.selection import Selection

logger = logging.getLogger(__name__)

NORM_EPS = 1e-12


def segment_plan(length: int, budget: int, tokens_per_frame: int, context_ratio: float,
                 anchor_period: int) -> tuple[list[int], list[int]]:
    """Salient and context token counts of each frame of one segment (the LLaVA-Video split).

    Args:
        length: ``L`` frames in the segment.
        budget: the segment's tokens ``b``, ``0 <= b <= L * P``.
        tokens_per_frame: ``P``.
        context_ratio: ``d``; context ``C = floor(b d)`` (on the decimal value of ``d``), salient
            ``S = b - C``.
        anchor_period: ``p``; the anchor frames are ``L - 1, L - 1 - p, ...`` (``ceil(L / p)``).
    Returns:
        ``(salient, context)``, two lists of ``L`` ints; ``salient[j] + context[j] <= P``,
        ``context[j] > 0`` only on anchor frames, total ``b``.
    """
    context_total = math.floor(Fraction(repr(float(context_ratio))) * budget)
    salient_total = budget - context_total
    base, extra = divmod(salient_total, length)
    salient = [base + (1 if j < extra else 0) for j in range(length)]
    anchors = list(range(length - 1, -1, -anchor_period))  # last frame first
    base, extra = divmod(context_total, len(anchors))
    context = [0] * length
    for m, frame in enumerate(anchors):
        context[frame] = base + (1 if m < extra else 0)
    # A frame can hold at most its non-salient tokens as context; move any excess elsewhere.
    shortfall = 0
    for frame in anchors:
        room = tokens_per_frame - salient[frame]
        shortfall += max(0, context[frame] - room)
        context[frame] = min(context[frame], room)
    for frame in anchors:
        give = min(shortfall, tokens_per_frame - salient[frame] - context[frame])
        context[frame] += give
        shortfall -= give
    for frame in range(length):
        give = min(shortfall, tokens_per_frame - salient[frame] - context[frame])
        salient[frame] += give
        shortfall -= give
    if shortfall:
        raise ValueError(f"segment budget {budget} exceeds its {length} x {tokens_per_frame} tokens")
    return salient, context


def merge_into_anchors(anchors: torch.Tensor, pool: torch.Tensor, beta: float) -> torch.Tensor:
    """DTM: each ``pool`` token joins its most cosine-similar anchor (ties to the earlier anchor);
    anchor ``a`` becomes ``w x_a + (1 - w) mean(assigned)``, ``w = max(1 / (n_a + 1), beta)``.

    Args:
        anchors: [n, D] float32.
        pool: [m, D] float32 (``m`` may be 0).
        beta: the lower bound of the anchor's own weight.
    Returns:
        [n, D] float32 merged anchors (an anchor nobody joined is returned unchanged).
    """
    if pool.shape[0] == 0:
        return anchors.clone()
    similarity = (torch.nn.functional.normalize(pool, dim=-1, eps=NORM_EPS)
                  @ torch.nn.functional.normalize(anchors, dim=-1, eps=NORM_EPS).T)
    labels = torch.argmax(similarity, dim=1)  # the first maximum: ties to the earlier anchor
    counts = torch.bincount(labels, minlength=anchors.shape[0]).to(anchors.dtype)
    sums = torch.zeros_like(anchors).index_add_(0, labels, pool)
    means = sums / counts.clamp_min(1)[:, None]
    weight = (1.0 / (counts + 1)).clamp_min(beta)[:, None]
    return weight * anchors + (1 - weight) * means


def merge_from_pool(pool: torch.Tensor, unit: torch.Tensor, anchor_rows: torch.Tensor, beta: float) -> torch.Tensor:
    """DTM of one anchor frame from its segment's pool, which is built (and normalised) once per segment.

    Bit-equal to ``merge_into_anchors(pool[anchor_rows], pool without anchor_rows, beta)`` on CPU:
    the similarity is the same ``[m - n, D] x [D, n]`` product of the same unit rows (a GEMM's
    rounding depends on its row count, so the rows are gathered rather than all ``m`` taken),
    and the sums add the same rows in the same order (the anchors' own rows go to a spare
    bucket that is dropped). What is no longer repeated per anchor frame: copying the raw pool
    and normalising the pool and the anchors.

    Args:
        pool: [m, D] float32, the segment's non-salient tokens.
        unit: [m, D] float32, ``pool`` L2-normalised by rows (norm floor ``NORM_EPS``).
        anchor_rows: [n] distinct rows of ``pool``: this frame's anchors.
        beta: the lower bound of the anchor's own weight.
    Returns:
        [n, D] float32 merged anchors, in ``anchor_rows`` order (an anchor nobody joined unchanged).
    """
    anchors = pool.index_select(0, anchor_rows)
    count = anchor_rows.shape[0]
    if pool.shape[0] == count:  # nothing left to join
        return anchors
    joins = torch.ones(pool.shape[0], dtype=torch.bool, device=pool.device)
    joins[anchor_rows] = False
    rest = torch.nonzero(joins).reshape(-1)
    similarity = unit.index_select(0, rest) @ unit.index_select(0, anchor_rows).T  # [m - n, n]
    labels = torch.full((pool.shape[0],), count, dtype=torch.long, device=pool.device)  # count: the spare bucket
    labels[rest] = torch.argmax(similarity, dim=1)  # the first maximum: ties to the earlier anchor
    counts = torch.bincount(labels, minlength=count + 1)[:count].to(pool.dtype)
    sums = pool.new_zeros(count + 1, pool.shape[1]).index_add_(0, labels, pool)[:count]
    means = sums / counts.clamp_min(1)[:, None]
    weight = (1.0 / (counts + 1)).clamp_min(beta)[:, None]
    return weight * anchors + (1 - weight) * means


def _salient_mask(attention: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """BoolTensor [L, P]: the top-``counts[j]`` tokens of each frame by ``attention`` [L, P]
    (ties to the lower index)."""
    order = torch.sort(attention, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return rank < counts[:, None]


def paper_select(frames: torch.Tensor, ratio: float, num_segments: int, segment_threshold: float,
                 context_ratio: float, anchor_period: int, beta: float, dpc_k: int,
                 vision_attention: torch.Tensor | None) -> Selection:
    """``variant="paper"``: the algorithm of the module docstring on ``frames`` [T, P, D] with the
    saliency ``vision_attention`` [T, P]; exactly ``floor(r T P)`` tokens, ``tokens`` [K, D] float32."""
    num_frames, tokens_per_frame, dim = frames.shape
    device = frames.device
    attention = vision_attention_input("fastvid", vision_attention, num_frames, tokens_per_frame, device)

    total = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)
    lengths = dyseg(frame_stats(frames).means, num_segments, segment_threshold)
    # Capacity T * P never binds: a segment's share B L / T is at most L P.
    segment_budgets = allocate_paper(lengths.to(torch.float64), total, num_frames * tokens_per_frame, 0)
    lengths_list, budgets_list = lengths.tolist(), segment_budgets.tolist()
    logger.debug("fastvid: B=%d, segment lengths %s, budgets %s", total, lengths_list, budgets_list)

    positions: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    start = 0
    for length, budget in zip(lengths_list, budgets_list):
        salient_counts, context_counts = segment_plan(length, budget, tokens_per_frame, context_ratio,
                                                      anchor_period)
        offset = start * tokens_per_frame
        segment = frames[start : start + length].float().reshape(length * tokens_per_frame, dim)
        salient = _salient_mask(attention[start : start + length],
                                torch.tensor(salient_counts, device=device)).reshape(-1)
        salient_index = torch.nonzero(salient).reshape(-1)
        positions.append(salient_index + offset)
        outputs.append(segment.index_select(0, salient_index))
        if any(context_counts):
            # The segment's pool (its non-salient tokens, ascending) and its normalisation, once.
            pool_index = torch.nonzero(~salient).reshape(-1)
            pool = segment.index_select(0, pool_index)
            unit = torch.nn.functional.normalize(pool, dim=-1, eps=NORM_EPS)
            row_of = torch.cumsum(~salient, 0) - 1  # a non-salient token's row in the pool
        for frame, count in enumerate(context_counts):
            if count == 0:
                continue
            frame_slice = slice(frame * tokens_per_frame, (frame + 1) * tokens_per_frame)
            candidates = torch.nonzero(~salient[frame_slice]).reshape(-1) + frame * tokens_per_frame
            rows = row_of.index_select(0, candidates)
            chosen = top_indices(density_peak_scores(pool.index_select(0, rows), dpc_k), count)
            positions.append(candidates.index_select(0, chosen) + offset)
            outputs.append(merge_from_pool(pool, unit, rows.index_select(0, chosen), beta))
        start += length

    keep = torch.cat(positions) if positions else torch.zeros(0, dtype=torch.long, device=device)
    tokens = torch.cat(outputs) if outputs else torch.zeros(0, dim, device=device)
    return selection_from_positions(keep, num_frames, tokens_per_frame, tokens=tokens)
