"""FastVID ``variant="official"``: the released code (LunarShen/FastVID @a40a109), in the input dtype.

Three releases, chosen with ``version``:

* ``"llava_ov"`` (default): ``fastvid_llavaonevision/LLaVA-NeXT/llava/model/language_model/
  modeling_qwen2.py`` L900-1075, the "parallel" version behind the LLaVA-OneVision rows (here);
* ``"llava_video"``: ``fastvid_llavavideo/.../modeling_qwen2.py`` L893-1091, the per-segment loop
  behind the LLaVA-Video rows;
* ``"qwen2_5_vl"``: ``fastvid_qwen25vl/lmms-eval/lmms_eval/models/qwenvlutils/modeling_qwen2_5_vl.py``
  L1889-2099, the same loop with the ``DySeg_ignore`` sub-segmentation and the ``P // 2`` caps.
  Its saliency is not the column mean the other releases read (``vision_attention``) but the last
  ViT block's mean query against its merge units' mean keys, its own model input
  ``vision_mean_query_attention``
  (:func:`baselines.fastvid.qwen2_5_vl_saliency.mean_query_saliency`, re-exported here), which the
  Qwen2.5-VL adapter computes from that block's rotated queries and keys under ``attach``. Which
  release a cell's ``official`` rows follow is its ``version`` parameter (an experiment config's
  ``reproduce_params: {fastvid: {version: qwen2_5_vl}}`` for a Qwen2.5-VL table).

The per-segment loop and the release's shared pieces are in :mod:`baselines.fastvid.release_loop`
(:func:`~baselines.fastvid.release_loop.loop_release`), which also runs
:mod:`baselines.fastvid.vidcom2_qwen`, with the VidCom2 port's own budgets and precision
(:class:`~baselines.fastvid.release_loop.LoopOptions`).

Every step uses the release's torch calls, shapes and dtypes, so bf16 in gives the release's bf16
arithmetic (normalisation by the raw norm, bf16 ``bmm``/``mm`` similarities and merges, bf16
one-hot counts and weights), float32 in gives float32; the DPC-kNN distances are float32 in every
release (``cdist`` of ``.float()`` tokens). Ties fall as the release's ``torch.topk`` (sorted),
``argmax`` (first maximum) and ``unique`` put them.

Randomness: the release adds ``torch.rand(shape) * 1e-6`` to the DPC densities. We draw the same
shapes in the same order from ``generator`` (``llava_ov``: one ``[T, P - S]`` draw; the loops: one
``[1, n]`` draw per frame that receives context tokens, in frame order), so with
``torch.Generator().manual_seed(seed)`` the noise equals the release's right after
``torch.manual_seed(seed)`` on CPU. The global RNG is never touched. On GPU the release draws from
the CUDA generator, which no CPU generator reproduces (the noise only breaks density ties).

Where the release raises (an index or ``topk`` error) we raise a ValueError naming the cause:
DySeg's ``topk(s, c - 1)`` on ``T - 1 < c - 1`` transitions (every version), no cut at all (the two
loop versions index ``cut_indices[0]``), fewer non-salient tokens than the DPC needs, and a
segment left without salient or context tokens (``torch.cat`` of an empty list).

Registers nothing; :mod:`baselines.fastvid.method` dispatches here.
"""

from __future__ import annotations

import logging

import torch

from baselines.common.model_inputs import vision_attention_input
from baselines.common.selection_output import selection_from_positions
from baselines.fastvid.qwen2_5_vl_saliency import mean_query_saliency
from baselines.fastvid.release_loop import (
    LLAVA_VIDEO,
    QWEN2_5_VL,
    LoopOptions,
    loop_release,
    merge_weighted,
    one_hot_nearest,
    release_density_scores,
    release_dyseg_cuts,
    release_similarities,
)
from vcast.selection import Selection

logger = logging.getLogger(__name__)

LLAVA_OV = "llava_ov"
VERSIONS = (LLAVA_OV, LLAVA_VIDEO, QWEN2_5_VL)
__all__ = ["LLAVA_OV", "LLAVA_VIDEO", "QWEN2_5_VL", "VERSIONS", "llava_ov_context_counts",
           "llava_ov_release", "mean_query_saliency", "official_select"]


def llava_ov_context_counts(sizes: list[int], num_frames: int, context: int, anchor_period: int,
                            device: torch.device | None = None) -> torch.Tensor:
    """Context tokens per frame (int32 [T]): in a segment of ``L`` frames, the frames ``j`` with
    ``(L - 1 - j) % p == 0`` get ``(C L) // ceil(L / p)``, the others 0."""
    counts = torch.zeros(num_frames, dtype=torch.int, device=device)
    start = 0
    for length in sizes:
        anchor_frames = (length + anchor_period - 1) // anchor_period
        backwards = torch.arange(length - 1, -1, -1, device=device)
        counts[start : start + length][backwards % anchor_period == 0] = context * length // anchor_frames
        start += length
    return counts


def llava_ov_release(frames: torch.Tensor, ratio: float, attention: torch.Tensor, features: torch.Tensor, *,
                     num_segments: int, threshold: float, context_ratio: float, anchor_period: int,
                     beta: float, dpc_k: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """FastVID's LLaVA-OneVision "parallel" version on one video.

    Args:
        frames: [T, P, D] tokens (their dtype is the arithmetic's).
        ratio: ``r``; ``R = int(P r)`` per frame, ``S = R - int(R d)`` salient, ``C = R - S`` context.
        attention: [T, P] saliency (the release: the SigLIP MAP-head attention), its own dtype.
        features: [T, D'] DySeg features (the release: the MAP-head pooled embedding).
        generator: the density noise (one ``[T, P - S]`` draw).
    Returns:
        (flat positions [K] in output order, tokens [K, D] in ``frames``' dtype).
    """
    num_frames, per_frame, dim = frames.shape
    device = frames.device
    _, similarities = release_similarities(features)
    cuts = release_dyseg_cuts(similarities, num_segments, threshold)
    sizes = torch.cat([cuts.new_tensor([-1]), cuts, cuts.new_tensor([num_frames - 1])]).diff().tolist()
    retain = int(per_frame * ratio)
    salient_count = retain - int(retain * context_ratio)
    context = retain - salient_count
    counts = llava_ov_context_counts(sizes, num_frames, context, anchor_period, device)
    rest_count = per_frame - salient_count
    if context == 0:
        raise ValueError(f"official FastVID (llava_ov): C = R - S = 0 context tokens per frame (R = int(P r) = "
                         f"{retain}, d = {context_ratio}); the release's argmax over zero anchors raises")
    largest = int(counts.max()) if num_frames else 0
    if largest > rest_count:
        raise ValueError(f"official FastVID (llava_ov): a multi-frame segment's anchor frame takes {largest} context "
                         f"tokens from {rest_count} non-salient ones; the release's topk raises")

    rows = torch.arange(num_frames, device=device).unsqueeze(1)
    flat_index = torch.arange(num_frames * per_frame, device=device).view(num_frames, per_frame)
    salient = torch.topk(attention, salient_count, dim=1).indices
    positions = [flat_index[rows.expand(-1, salient_count), salient].reshape(-1)]
    outputs = [frames[rows.expand(-1, salient_count), salient].reshape(-1, dim)]

    others = torch.ones(num_frames, per_frame, dtype=torch.bool, device=device)
    others.scatter_(1, salient, False)
    rest = (torch.arange(per_frame, device=device).unsqueeze(0).expand(num_frames, -1)[others]
            .view(num_frames, rest_count))
    pool = frames[rows.expand(-1, rest_count), rest]
    pool_index = flat_index[rows.expand(-1, rest_count), rest]
    scores = release_density_scores(pool, dpc_k, generator)

    # Single-frame rule, computed for every frame; kept where the frame's count equals C.
    picked = torch.topk(scores, k=context, dim=-1).indices
    take = rows.expand(-1, context)
    unit = pool / pool.norm(dim=-1, keepdim=True)
    assignment = one_hot_nearest(torch.bmm(unit, unit[take, picked].transpose(1, 2)), pool.dtype)
    merged = merge_weighted(pool[take, picked], assignment, pool, beta)
    single = counts == context
    positions.append(pool_index[take, picked][single].reshape(-1))
    outputs.append(merged[single].reshape(-1, dim))

    # Multi-frame segments: each anchor frame (count > C) merges the whole segment's non-salient tokens.
    start = 0
    for length in sizes:
        if length > 1:
            segment_counts = counts[start : start + length]
            take_count = int(segment_counts[-1])
            targets = segment_counts > context
            num_targets = int(targets.sum())
            segment_pool = pool[start : start + length]
            flat_pool = segment_pool.view(1, -1, dim).expand(num_targets, -1, -1)
            picked = torch.topk(scores[start : start + length][targets], k=take_count, dim=-1).indices
            take = rows[:num_targets].expand(-1, take_count)
            anchors = segment_pool[targets][take, picked]
            unit_pool = flat_pool / flat_pool.norm(dim=-1, keepdim=True)
            unit_anchors = anchors / anchors.norm(dim=-1, keepdim=True)
            assignment = one_hot_nearest(torch.bmm(unit_pool, unit_anchors.transpose(1, 2)), pool.dtype)
            outputs.append(merge_weighted(anchors, assignment, flat_pool, beta).reshape(-1, dim))
            positions.append(pool_index[start : start + length][targets][take, picked].reshape(-1))
        start += length
    return torch.cat(positions), torch.cat(outputs)


def official_select(frames: torch.Tensor, ratio: float, version: str, saliency: torch.Tensor | None, *,
                    num_segments: int, threshold: float, context_ratio: float, anchor_period: int, beta: float,
                    dpc_k: int, ignore: float | None, seed: int) -> Selection:
    """``variant="official"`` on ``frames`` [T, P, D]: the release ``version`` with ``saliency``
    [T, P] (the model input ``vision_attention``; for ``"qwen2_5_vl"`` ``vision_mean_query_attention``,
    checked by the caller) and the per-frame token mean as DySeg feature; the DPC noise comes from
    ``torch.Generator().manual_seed(seed)``.

    Returns:
        Selection with ``tokens`` [K, D] in ``frames``' dtype.
    """
    num_frames, tokens_per_frame, _ = frames.shape
    generator = torch.Generator().manual_seed(seed)
    common = {"num_segments": num_segments, "threshold": threshold, "context_ratio": context_ratio,
              "anchor_period": anchor_period, "beta": beta, "dpc_k": dpc_k, "generator": generator}
    if version != QWEN2_5_VL:
        vision_attention_input("fastvid", saliency, num_frames, tokens_per_frame, frames.device)
    attention = saliency.to(frames.device)  # its own dtype, as the release's attention
    frames = frames.contiguous()
    features = frames.mean(dim=1)  # Qwen2.5-VL's frame feature (the LLaVA MAP embedding is unavailable)
    if version == LLAVA_OV:
        keep, tokens = llava_ov_release(frames, ratio, attention, features, **common)
    else:
        options = LoopOptions(budgets=version, ignore=ignore)
        keep, tokens = loop_release(frames, ratio, attention, features, options=options, **common)
    logger.debug("fastvid official %s: kept %d of %d", version, keep.numel(), num_frames * tokens_per_frame)
    return selection_from_positions(keep, num_frames, tokens_per_frame, tokens=tokens)
