"""The registration of ``visionzip`` (VisionZip per frame): its facts, parameters, checks and the
dispatch to the variant modules; the package docstring describes the method."""

from __future__ import annotations

from typing import Optional

import torch

from baselines.common.model_inputs import vision_attention_input, vision_keys_input
from baselines.visionzip.official import official_selection
from baselines.visionzip.paper import paper_select
from baselines.visionzip.vidcom2_qwen import vidcom2_qwen_selection
from vcast.method_facts import MethodFacts
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_choice, check_int, check_positive, check_range
from vcast.variants import OFFICIAL, PAPER, VIDCOM2_QWEN, check_variant

TEMPORAL_CHOICES = ("uniform", "curvature")
MERGE_CHOICES = ("sum", "mean")
DOMINANT_RATIO = 54 / 64  # HoliTom's DOMINANT_RATIO (VisionZip README: 54 dominant, 10 contextual)
VIDCOM2_QWEN_DOMINANT_RATIO = 0.6  # VidCom2 qwen: visionzip_dominant_ratio
NEWLINE_CHOICES = ("one_token", "grid")
VARIANTS = (PAPER, OFFICIAL, VIDCOM2_QWEN)

FACTS = MethodFacts(
    display="VisionZip",
    venue="CVPR'25",
    paper='"VisionZip: Longer is Better but Not Necessary in Vision Language Models" (Yang et al., CVPR 2025)',
    code={
        PAPER: "cokeshao/HoliTom@e9b2972 visionzip/llava_arch.py",
        OFFICIAL: "cokeshao/HoliTom@e9b2972 visionzip/llava_arch.py",
        VIDCOM2_QWEN: "xuyang-liu16/VidCom2@a85d485 token_compressor/visionzip/{core,visionzip}.py",
    },
)


@register_method("visionzip", inputs=("vision_attention", "vision_keys"), variants=VARIANTS,
                 variant_inputs={VIDCOM2_QWEN: ()}, facts=FACTS)  # the port ranks by token norms
def visionzip_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    variant: str = PAPER,
    dominant_ratio: Optional[float] = None,
    temporal: str = "uniform",
    tau: float = 0.7,
    merge: str = "sum",
    spatial_tokens: Optional[int] = None,
    newline_position: str = "one_token",
    k_neighbors: int = 5,
    vision_attention: Optional[torch.Tensor] = None,
    vision_keys: Optional[torch.Tensor] = None,
) -> Selection:
    """VisionZip per frame (:mod:`baselines.visionzip`) on ``frames`` [T, P, D].

    Args:
        frames: [T, P, D] LLM-space video tokens, any float dtype.
        ratio: retention ratio r in (0, 1].
        variant: ``paper`` (ours, float32) | ``official`` (HoliTom's adaptation, input dtype) |
            ``vidcom2_qwen`` (VidCom2's Qwen port, input dtype).
        dominant_ratio: share of each frame's budget kept as dominant tokens, in [0, 1]; None:
            54/64 (``paper``, ``official``) or 0.6 (``vidcom2_qwen``).
        temporal: ``uniform`` (equal per-frame budgets) | ``curvature`` (V-CAST's allocation);
            ``paper`` only.
        tau: softmax temperature of ``temporal="curvature"`` (> 0).
        merge: ``sum`` (official: target + mean of assigned) | ``mean`` (average of both);
            ``paper`` only.
        spatial_tokens: ``official`` only: SPATIAL_TOKENS per frame (1..P); None: ``round(r * P)``.
        newline_position: ``official`` only: ``one_token`` | ``grid`` (the output order).
        k_neighbors: ``vidcom2_qwen`` only: k of the kNN density (>= 1).
        vision_attention: [T, P] attention received per token (required by ``paper`` and
            ``official``; ignored by ``vidcom2_qwen``).
        vision_keys: [T, P, d] keys of the feature layer; None: ``frames`` are the merge metric
            (ignored by ``vidcom2_qwen``).
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and ``tokens`` [K, D]: float32 and
        ``K = floor(r T P)`` for ``paper``; ``frames``' dtype and ``K = T * s`` (``official``) or
        ``T * max(1, int(P r))`` (``vidcom2_qwen``) otherwise.
    """
    variant = check_variant("visionzip", variant, VARIANTS)
    num_frames, tokens_per_frame, _ = frames.shape
    if dominant_ratio is None:
        dominant_ratio = VIDCOM2_QWEN_DOMINANT_RATIO if variant == VIDCOM2_QWEN else DOMINANT_RATIO
    dominant_ratio = check_range("dominant_ratio", dominant_ratio, 0.0, 1.0)
    check_choice("temporal", temporal, TEMPORAL_CHOICES)
    tau = check_positive("tau", tau)
    check_choice("merge", merge, MERGE_CHOICES)
    check_choice("newline_position", newline_position, NEWLINE_CHOICES)
    k_neighbors = check_int("k_neighbors", k_neighbors, 1)
    if spatial_tokens is not None:
        spatial_tokens = min(check_int("spatial_tokens", spatial_tokens, 1), tokens_per_frame)  # release: fails
    _check_variant_params(variant, temporal, merge, spatial_tokens, newline_position, k_neighbors)
    if variant == VIDCOM2_QWEN:
        return vidcom2_qwen_selection(frames, ratio, dominant_ratio, k_neighbors)
    device = frames.device
    attention = vision_attention_input("visionzip", vision_attention, num_frames, tokens_per_frame, device)
    if vision_keys is not None:
        vision_keys = vision_keys_input(vision_keys, num_frames, tokens_per_frame, device)
    if variant == OFFICIAL:
        if spatial_tokens is None:
            spatial_tokens = min(tokens_per_frame, max(1, round(ratio * tokens_per_frame)))
        return official_selection(frames, attention, vision_keys, spatial_tokens, dominant_ratio, newline_position)
    return paper_select(frames, ratio, attention, vision_keys, dominant_ratio=dominant_ratio, temporal=temporal,
                        tau=tau, merge=merge)


def _check_variant_params(variant: str, temporal: str, merge: str, spatial_tokens: Optional[int],
                          newline_position: str, k_neighbors: int) -> None:
    """Refuse a parameter the chosen variant does not have (rather than ignore it)."""
    own = {"temporal": (temporal != "uniform", (PAPER,)), "merge": (merge != "sum", (PAPER,)),
           "spatial_tokens": (spatial_tokens is not None, (OFFICIAL,)),
           "newline_position": (newline_position != "one_token", (OFFICIAL,)),
           "k_neighbors": (k_neighbors != 5, (VIDCOM2_QWEN,))}
    for name, (changed, variants) in own.items():
        if changed and variant not in variants:
            raise ValueError(f"visionzip: {name} applies to variant {variants[0]!r} only, not {variant!r}")
