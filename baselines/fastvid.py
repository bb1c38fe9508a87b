"""FastVID: dynamic density pruning, as a vcast compressor.

Paper: "FastVID: Dynamic Density Pruning for Fast Video Large Language Models" (NeurIPS 2025).
Official code: LunarShen/FastVID @a40a109 (reference_methods.md section 6; sections 1 and 10):
the LLaVA-OneVision "parallel" version (6.1), the LLaVA-Video per-segment loop (6.2), Qwen2.5-VL
(6.3); the VidCom2 ``qwen`` port (6.4).

Variants (``variant=``; parameters ``segment_threshold``, ``context_ratio``, ``beta`` and
``ignore_threshold`` default to None, resolved per variant):

* ``"paper"`` (default): this file's algorithm below, unchanged; float32 scores and merges
  whatever the input dtype; exactly ``floor(r T P)`` tokens; no noise (``seed`` unused).
  Defaults c = 8, tau = 0.9, d = 0.4, p = 4, beta = 0.6, DPC k = 4.
* ``"official"``: the release, bit for bit on CPU, in the input dtype
  (:mod:`baselines.fastvid_official`); ``version=`` picks the release:
  ``"llava_ov"`` (default; LLaVA-OneVision ``modeling_qwen2.py`` L900-1075, the "parallel"
  version: per frame ``R = int(P r)``, ``S = R - int(R d)``, ``C = R - S``; anchor frames of a
  segment of ``L`` frames get ``(C L) // ceil(L / p)``), ``"llava_video"`` (L893-1091, the loop:
  ``R L`` per segment split as in step 2 below with ``int``), ``"qwen2_5_vl"`` (L1889-2099: the
  loop plus the ``DySeg_ignore`` sub-segmentation, ``max(int(R L d), 1)`` and the ``P // 2``
  caps). Defaults: llava_ov / llava_video c = 8, tau = 0.9, d = 0.4, p = 4, beta = 0.6;
  qwen2_5_vl tau = 0.84, ignore = 0.95 (its ``eval.sh``; its ratio there is 0.27). The DPC noise
  ``torch.rand * 1e-6`` is drawn from ``torch.Generator().manual_seed(seed)`` in the release's
  shapes and order. Where the release raises, a ValueError says why: DySeg with
  ``T - 1 < c - 1`` (its ``topk(s, c - 1)``), no cut at all (loop versions), ``C = 0``
  (llava_ov), too few non-salient tokens, a segment without salient or context tokens.
  Quirks kept: the tau comparison of a bf16 cosine is against ``bf16(tau)`` (0.8984375 for
  0.9); bf16 one-hot counts and weights (``bf16(0.6) = 0.6015625``); single-frame (llava_ov)
  anchors assign to themselves too; an anchor frame of a multi-frame segment whose count equals
  ``C`` (e.g. p = 2, L = 3) takes the single-frame rule; tokens dropped by the Qwen2.5 caps.
  Inputs not reproduced (adapter matters): the LLaVA DySeg feature is the SigLIP MAP-head
  embedding, which the HF vision tower lacks: every version here uses the per-frame token mean
  in the input dtype (what the Qwen2.5-VL release uses); ``vision_attention`` stands for the
  MAP-head probe attention (LLaVA, bilinear-pooled for OV, average-pooled for Video) or the
  last-ViT-block mean-query attention (Qwen2.5-VL). LLaVA-Video's newline tokens (one re-inserted
  per row with a kept token) are outside ``frames``.
* ``"vidcom2_qwen"``: VidCom2 ``qwen`` @a85d485 ``token_compressor/fastvid/{core,fastvid_algo}.py``
  (:mod:`baselines.fastvid_vidcom2_qwen`): the Qwen2.5-VL loop with **the tokens' L2 norm as
  importance** (``vision_attention`` ignored), float32 segmentation with the guard
  ``k = min(c - 1, T - 1)``, float32 merge similarities, bf16 merge arithmetic for bf16 input.
  Defaults c = 8, tau = 0.84, ignore = 0.99, d = 0.5, p = 4, beta = 0.5. Positions: the salient
  tokens' and anchors' own indices (merged tokens at their anchor's slot), as the port slices.

Measured agreement with the released code, loaded at run time on CPU
(a comparison outside the project, docs/fidelity.md; exact = same kept positions and
bit-equal tokens; cases where both raise count as agreeing): official llava_ov fp32 150/150,
bf16 150/150 (118 / 115 with outputs); llava_video fp32 154/154, bf16 154/154 (including 64 x 169
runs of the unmodified code); qwen2_5_vl fp32 150/150, bf16 150/150; vidcom2_qwen fp32 150/150,
bf16 150/150; plus 4/4 per variant and dtype at the papers' shapes and defaults. Not bit-equal:
the noise on GPU (the release draws from the CUDA generator; ours from a CPU generator), and
``cdist``/``bmm``/``mm`` results may differ between CPU and GPU kernels.

Algorithm of ``variant="paper"`` (per video, tokens ``frames`` [T, P, D]):

1. **DySeg** (:mod:`baselines.dyseg`): segments of consecutive frames, cut after the ``c - 1``
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
  frame at P = 196, r = 0.1). The per-segment split itself is LLaVA-Video's (6.2).
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
  the earlier transition; guard ``k = min(c - 1, T - 1)`` for short videos (see :mod:`baselines.dyseg`).
* **Single-frame segments** use the same DTM rule as longer ones (6.2: the pool excludes the
  anchors); the LLaVA-OneVision version (6.1 step 6) also assigns the anchors to themselves.
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
from baselines.dyseg import dyseg
from baselines.fastvid_official import (
    LLAVA_OV,
    LLAVA_VIDEO,
    QWEN2_5_VL,
    VERSIONS,
    LoopOptions,
    llava_ov_release,
    loop_release,
)
from baselines.fastvid_vidcom2_qwen import vidcom2_qwen_release
from baselines.common.model_inputs import vision_attention_input
from baselines.common.selection_output import selection_from_positions
from vcast.allocation import allocate_paper
from vcast.budget import paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int, check_range
from vcast.variants import OFFICIAL, PAPER, VIDCOM2_QWEN, check_variant

logger = logging.getLogger(__name__)

NORM_EPS = 1e-12


def segment_plan(length: int, budget: int, tokens_per_frame: int, context_ratio: float,
                 anchor_period: int) -> tuple[list[int], list[int]]:
    """Salient and context token counts of each frame of one segment (LLaVA-Video split, 6.2).

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


FASTVID_VARIANTS = (PAPER, OFFICIAL, VIDCOM2_QWEN)

# Per variant (official: per release version): segment_threshold, context_ratio, beta, ignore_threshold.
_DEFAULTS = {
    PAPER: (0.9, 0.4, 0.6, None),
    LLAVA_OV: (0.9, 0.4, 0.6, None),
    LLAVA_VIDEO: (0.9, 0.4, 0.6, None),
    QWEN2_5_VL: (0.84, 0.4, 0.6, 0.95),
    VIDCOM2_QWEN: (0.84, 0.5, 0.5, 0.99),
}


@register_method("fastvid", inputs=("vision_attention",), variants=FASTVID_VARIANTS,
                 variant_inputs={VIDCOM2_QWEN: ()})  # the port ranks by token norms
def fastvid_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    num_segments: int = 8,
    segment_threshold: float | None = None,
    context_ratio: float | None = None,
    anchor_period: int = 4,
    beta: float | None = None,
    dpc_k: int = 4,
    ignore_threshold: float | None = None,
    variant: str = PAPER,
    version: str | None = None,
    seed: int = 0,
    vision_attention: torch.Tensor | None = None,
) -> Selection:
    """FastVID on one video (module docstring): ``frames`` [T, P, D] -> Selection.

    ``"paper"``: exactly ``floor(r T P)`` tokens, ``tokens`` [K, D] float32 (salient tokens as they
    are, merged anchors). ``"official"`` / ``"vidcom2_qwen"``: the release's count, ``tokens`` in
    ``frames``' dtype.

    Args:
        frames: [T, P, D] video tokens, any float dtype.
        ratio: retention ratio r in (0, 1].
        num_segments: DySeg ``c`` (at least ``c - 1`` cuts, fewer when ``T < c``; ``"official"``
            raises a ValueError when ``T - 1 < c - 1``, as the release's ``topk`` does).
        segment_threshold: DySeg ``tau``, a cut wherever consecutive frames' cosine is below it.
            None: 0.9 (paper, official llava_ov / llava_video), 0.84 (official qwen2_5_vl, vidcom2_qwen).
        context_ratio: ``d``, the share of the budget spent on merged context tokens. None: 0.4,
            0.5 for vidcom2_qwen.
        anchor_period: ``p``, every ``p``-th frame (from the last) of a segment is an anchor frame.
        beta: DTM lower bound of an anchor's own weight. None: 0.6, 0.5 for vidcom2_qwen.
        dpc_k: neighbours (self included) of the DPC-kNN density.
        ignore_threshold: the Qwen2.5-VL ``DySeg_ignore`` sub-segmentation threshold, only for
            official ``version="qwen2_5_vl"`` (None: 0.95) and ``"vidcom2_qwen"`` (None: 0.99);
            a ValueError elsewhere.
        variant: ``"paper"`` (this file), ``"official"`` (:mod:`baselines.fastvid_official`) or
            ``"vidcom2_qwen"`` (:mod:`baselines.fastvid_vidcom2_qwen`).
        version: the official release, ``"llava_ov"`` (None's meaning), ``"llava_video"`` or
            ``"qwen2_5_vl"``; only with ``variant="official"``.
        seed: seed of the DPC density noise ``torch.rand * 1e-6`` of ``"official"`` and
            ``"vidcom2_qwen"`` (a CPU ``torch.Generator``; the global RNG is untouched). Unused by
            ``"paper"``, which has no noise.
        vision_attention: [T, P] saliency of every token (model input); ignored by ``"vidcom2_qwen"``
            (it scores tokens by their L2 norm).
    """
    variant = check_variant("fastvid", variant, FASTVID_VARIANTS)
    if variant == OFFICIAL:
        version = LLAVA_OV if version is None else version
        if version not in VERSIONS:
            raise ValueError(f"version must be one of {', '.join(map(repr, VERSIONS))} for variant 'official', "
                             f"got {version!r}")
    elif version is not None:
        raise ValueError(f"version selects an official FastVID release; variant {variant!r} takes none, "
                         f"got {version!r}")
    key = version if variant == OFFICIAL else variant
    tau_default, d_default, beta_default, ignore_default = _DEFAULTS[key]
    if ignore_threshold is not None and ignore_default is None:
        raise ValueError("ignore_threshold is the DySeg_ignore sub-segmentation of official version='qwen2_5_vl' "
                         f"and of variant 'vidcom2_qwen'; {key!r} has none")
    segment_threshold = tau_default if segment_threshold is None else segment_threshold
    context_ratio = d_default if context_ratio is None else context_ratio
    beta = beta_default if beta is None else beta
    check_int("num_segments", num_segments, 1)
    check_range("segment_threshold", segment_threshold, -1.0, 1.0)
    check_range("context_ratio", context_ratio, 0.0, 1.0)
    check_int("anchor_period", anchor_period, 1)
    check_range("beta", beta, 0.0, 1.0)
    check_int("dpc_k", dpc_k, 1)
    check_int("seed", seed, 0)
    if ignore_default is not None:
        ignore_threshold = check_range("ignore_threshold", ignore_default if ignore_threshold is None
                                       else ignore_threshold, -1.0, 1.0)
    if variant == PAPER:
        return _paper_select(frames, ratio, num_segments, segment_threshold, context_ratio, anchor_period, beta,
                             dpc_k, vision_attention)
    num_frames, tokens_per_frame, _ = frames.shape
    generator = torch.Generator().manual_seed(seed)
    common = {"num_segments": num_segments, "threshold": segment_threshold, "context_ratio": context_ratio,
              "anchor_period": anchor_period, "beta": beta, "dpc_k": dpc_k, "generator": generator}
    if variant == VIDCOM2_QWEN:
        keep, tokens = vidcom2_qwen_release(frames, ratio, ignore=ignore_threshold, **common)
    else:
        vision_attention_input("fastvid", vision_attention, num_frames, tokens_per_frame, frames.device)
        attention = vision_attention.to(frames.device)  # its own dtype, as the release's attention
        frames = frames.contiguous()
        features = frames.mean(dim=1)  # Qwen2.5-VL's frame feature (the LLaVA MAP embedding is unavailable)
        if version == LLAVA_OV:
            keep, tokens = llava_ov_release(frames, ratio, attention, features, **common)
        else:
            options = LoopOptions(budgets=version, ignore=ignore_threshold)
            keep, tokens = loop_release(frames, ratio, attention, features, options=options, **common)
    logger.debug("fastvid %s %s: kept %d of %d", variant, version or "", keep.numel(), num_frames * tokens_per_frame)
    return selection_from_positions(keep, num_frames, tokens_per_frame, tokens=tokens)


def _paper_select(frames: torch.Tensor, ratio: float, num_segments: int, segment_threshold: float,
                  context_ratio: float, anchor_period: int, beta: float, dpc_k: int,
                  vision_attention: torch.Tensor | None) -> Selection:
    """``variant="paper"``: the algorithm of the module docstring."""
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
