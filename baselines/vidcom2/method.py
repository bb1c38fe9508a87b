"""The ``vidcom2`` registration: parameters, defaults, checks and dispatch to the variant modules."""

from __future__ import annotations

from typing import Optional

import torch

from baselines.vidcom2.official import official_select
from baselines.vidcom2.paper import paper_select
from vcast.method_facts import MethodFacts
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_choice, check_positive
from vcast.variants import OFFICIAL, PAPER, check_variant

TEMPORAL_CHOICES = ("uniqueness", "curvature")
ALLOCATION_CHOICES = ("paper", "official")
VARIANTS = (PAPER, OFFICIAL)

FACTS = MethodFacts(
    display="VidCom²",
    venue="EMNLP'25",
    paper='"Video Compression Commander: Plug-and-Play Inference Acceleration for Video Large Language Models" '
          "(Liu et al., EMNLP 2025)",
    code={OFFICIAL: "xuyang-liu16/VidCom2@944a17d token_compressor/vidcom2/vidcom2.py"},
    vllm=True,
)


@register_method("vidcom2", inputs=(), variants=VARIANTS, facts=FACTS)
def vidcom2_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    temporal: str = "uniqueness",
    allocation: Optional[str] = None,
    tau: float = 0.7,
    variant: str = PAPER,
) -> Selection:
    """Keep, in each frame, the tokens least similar to the video and frame centres.

    Args:
        frames: [T, P, D] LLM-space video tokens, any float dtype (checked by ``vcast.select``).
        ratio: retention ratio r in (0, 1].
        temporal: ``"uniqueness"`` (VidCom2's budgets) or ``"curvature"`` (V-CAST's budgets).
        allocation: ``"paper"`` (exactly ``floor(r T P)`` tokens) or ``"official"`` (the
            released per-frame rounding; uniqueness only). None: ``"paper"`` for
            ``variant="paper"``, ``"official"`` for ``variant="official"`` (which takes no other).
        tau: softmax temperature of ``temporal="curvature"`` (> 0; unused otherwise).
        variant: ``"paper"`` (float32 scores) or ``"official"`` (the release, in ``frames``'
            dtype; uniqueness budgets with the official rounding only). See the
            :mod:`baselines.vidcom2` docstring.
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and the temporal density [T] (float32).
    """
    variant = check_variant("vidcom2", variant, VARIANTS)
    if allocation is None:
        allocation = "official" if variant == OFFICIAL else "paper"
    check_choice("temporal", temporal, TEMPORAL_CHOICES)
    check_choice("allocation", allocation, ALLOCATION_CHOICES)
    tau = check_positive("tau", tau)
    if variant == OFFICIAL:
        if temporal != "uniqueness":
            raise ValueError("vidcom2: temporal='curvature' (the '+V-CAST budgeting' ablation) has "
                             "variant='paper' only")
        if allocation != "official":
            raise ValueError("vidcom2: variant='official' uses the released allocation='official' only")
        return official_select(frames, ratio)
    if temporal == "curvature" and allocation != "paper":
        raise ValueError("allocation='official' is VidCom2's rounding of its uniqueness scale; "
                         "temporal='curvature' takes V-CAST's allocation='paper' only")
    return paper_select(frames, ratio, temporal, allocation, tau)
