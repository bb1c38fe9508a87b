"""The ``flashvid_merge`` registration: parameters, defaults, checks and dispatch to the variant modules."""

from __future__ import annotations

import torch

from baselines.common import papers
from baselines.common.model_inputs import vision_attention_input
from baselines.flashvid_merge.official import flashvid_merge_official
from baselines.flashvid_merge.paper import paper_merge
from baselines.flashvid_merge.params import check_merge_params
from vcast.method_facts import MethodFacts
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int
from vcast.variants import OFFICIAL, PAPER, check_variant

FACTS = MethodFacts(
    display="FlashVID (vision side)",
    venue="ICLR'26",
    paper=papers.FLASHVID,
    code={OFFICIAL: "Fanziyang-v/FlashVID@1d37422 flashvid/utils.py flashvid_compression"},
)

VARIANTS = (PAPER, OFFICIAL)


@register_method("flashvid_merge", inputs=("vision_attention",), variants=VARIANTS, facts=FACTS)
def flashvid_merge_select(frames: torch.Tensor, ratio: float, *, selection: str = "attn_div_v2",
                          alpha: float = 0.7, expansion: float = 1.25, segment_threshold: float = 0.9,
                          min_segment_num: int = 8, temporal_threshold: float = 0.8,
                          vision_attention: torch.Tensor | None = None, variant: str = PAPER,
                          seed: int = 0) -> Selection:
    """FlashVID's vision side on ``frames`` [T, P, D]; see :mod:`baselines.flashvid_merge`.

    ``variant="official"`` runs :func:`baselines.flashvid_merge.official.flashvid_merge_official` (the
    release in ``frames``' dtype; ``seed`` seeds its DPC-kNN noise), ``"paper"``
    :func:`baselines.flashvid_merge.paper.paper_merge`. ``seed`` is unused by ``"paper"`` (no noise).

    Returns:
        Selection with ``tokens`` [K, D] (``paper``: float32; ``official``: ``frames``' dtype; ADTS
        tokens unchanged, tree / cluster merges at their root's / centre's position); K follows the
        official per-frame ceil rule.
    """
    variant = check_variant("flashvid_merge", variant, VARIANTS)
    check_merge_params(selection, alpha, expansion, segment_threshold, min_segment_num, temporal_threshold)
    seed = check_int("seed", seed, 0)
    num_frames, tokens_per_frame, _ = frames.shape
    attention = vision_attention_input("flashvid_merge", vision_attention, num_frames, tokens_per_frame,
                                       frames.device)
    if variant == OFFICIAL:
        return flashvid_merge_official(frames, ratio, attention, selection=selection, alpha=alpha,
                                       expansion=expansion, segment_threshold=segment_threshold,
                                       min_segment_num=min_segment_num, temporal_threshold=temporal_threshold,
                                       seed=seed)
    return paper_merge(frames, ratio, attention, selection=selection, alpha=alpha, expansion=expansion,
                       segment_threshold=segment_threshold, min_segment_num=min_segment_num,
                       temporal_threshold=temporal_threshold)
