"""The ``fastvid`` registration: parameters, defaults, checks and dispatch to the variant modules."""

from __future__ import annotations

import torch

from baselines.fastvid.official import LLAVA_OV, LLAVA_VIDEO, QWEN2_5_VL, VERSIONS, official_select
from baselines.fastvid.paper import paper_select
from baselines.fastvid.qwen2_5_vl_saliency import MEAN_QUERY_ATTENTION, saliency_input
from baselines.fastvid.vidcom2_qwen import vidcom2_qwen_select
from vcast.method_facts import MethodFacts
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int, check_range
from vcast.variants import OFFICIAL, PAPER, VIDCOM2_QWEN, check_variant

FACTS = MethodFacts(
    display="FastVID",
    venue="NeurIPS'25",
    paper='"FastVID: Dynamic Density Pruning for Fast Video Large Language Models" (Shen et al., NeurIPS 2025)',
    code={
        OFFICIAL: "LunarShen/FastVID@a40a109 fastvid_llavaonevision/.../modeling_qwen2.py",
        VIDCOM2_QWEN: "xuyang-liu16/VidCom2@a85d485 token_compressor/fastvid/{core,fastvid_algo}.py",
    },
)

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
                 variant_inputs={VIDCOM2_QWEN: ()},  # the port ranks by token norms
                 param_inputs={(OFFICIAL, "version", QWEN2_5_VL): (MEAN_QUERY_ATTENTION,)},  # the release's saliency
                 facts=FACTS)
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
    vision_mean_query_attention: torch.Tensor | None = None,
) -> Selection:
    """FastVID on one video (:mod:`baselines.fastvid`): ``frames`` [T, P, D] -> Selection.

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
        variant: ``"paper"`` (:mod:`baselines.fastvid.paper`), ``"official"``
            (:mod:`baselines.fastvid.official`) or ``"vidcom2_qwen"`` (:mod:`baselines.fastvid.vidcom2_qwen`).
        version: the official release, ``"llava_ov"`` (None's meaning), ``"llava_video"`` or
            ``"qwen2_5_vl"``; only with ``variant="official"``.
        seed: seed of the DPC density noise ``torch.rand * 1e-6`` of ``"official"`` and
            ``"vidcom2_qwen"`` (a CPU ``torch.Generator``; the global RNG is untouched). Unused by
            ``"paper"``, which has no noise.
        vision_attention: [T, P] saliency of every token (model input: the vision encoder's column
            mean); read by ``"paper"`` and official ``"llava_ov"`` / ``"llava_video"``, ignored by the
            others (``"vidcom2_qwen"`` scores tokens by their L2 norm).
        vision_mean_query_attention: [T, P] the saliency of official ``version="qwen2_5_vl"`` (model
            input): the release's mean query against each merge unit's mean key in the last ViT block
            (:mod:`baselines.fastvid.qwen2_5_vl_saliency`), in the model's dtype; ignored by the others.
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
        return paper_select(frames, ratio, num_segments, segment_threshold, context_ratio, anchor_period, beta,
                            dpc_k, vision_attention)
    common = {"num_segments": num_segments, "threshold": segment_threshold, "context_ratio": context_ratio,
              "anchor_period": anchor_period, "beta": beta, "dpc_k": dpc_k, "ignore": ignore_threshold,
              "seed": seed}
    if variant == VIDCOM2_QWEN:
        return vidcom2_qwen_select(frames, ratio, **common)
    if version == QWEN2_5_VL:  # the release ranks by its own saliency, not the column mean
        saliency = saliency_input(vision_mean_query_attention, frames.shape[0], frames.shape[1], frames.device,
                                  given_column_means=vision_attention is not None)
        return official_select(frames, ratio, version, saliency, **common)
    return official_select(frames, ratio, version, vision_attention, **common)
