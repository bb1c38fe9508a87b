"""The ``dycoke`` registration: parameters, defaults, checks and dispatch to the variant modules."""

from __future__ import annotations

import torch

from baselines.dycoke.official import OFFICIAL_K, official_select
from baselines.dycoke.paper import paper_select
from baselines.dycoke.vidcom2_qwen import vidcom2_qwen_select
from vcast.method_facts import MethodFacts
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_range
from vcast.variants import OFFICIAL, PAPER, VIDCOM2_QWEN, check_variant

FACTS = MethodFacts(
    display="DyCoke (TTM)",
    venue="CVPR'25",
    paper='"DyCoke: Dynamic Compression of Tokens for Fast Video Large Language Models" (Tao et al., CVPR 2025)',
    code={
        OFFICIAL: "KD-TAO/DyCoke@dd74634 llava/model/llava_arch.py dycole_ttm",
        VIDCOM2_QWEN: "xuyang-liu16/VidCom2@a85d485 token_compressor/dycoke/{core,temporal_token_merging}.py",
    },
    vllm=True,
)


@register_method("dycoke", inputs=(), variants=(PAPER, OFFICIAL, VIDCOM2_QWEN), facts=FACTS)
def dycoke_select(frames: torch.Tensor, ratio: float, *, k: float | None = None,
                  variant: str = PAPER) -> Selection:
    """DyCoke TTM on ``frames`` [T, P, D]: anchor frames whole, the others keep ``n`` tokens.

    Args:
        frames: float [T, P, D], any dtype and device.
        ratio: r in (0, 1]; used only when ``k`` is None and the variant maps ``K = 1 - r``
            (paper, vidcom2_qwen); unused by ``official`` (its default K is 0.7).
        k: DyCoke's K, the share of tokens pruned in a reduced frame. None: ``1 - r`` (paper,
            vidcom2_qwen), 0.7 (official).
        variant: "paper" (float32 cosines, decimal count, odd T reduces the last frame),
            "official" (KD-TAO/DyCoke's ``dycole_ttm``) or "vidcom2_qwen" (the VidCom2 qwen port).
    Returns:
        Selection with ``A * P + (T - A) * n`` kept positions for "paper" (see the
        :mod:`baselines.dycoke` docstring); for "official" and "vidcom2_qwen" the last frame of an
        odd T keeps none. "official" also returns ``tokens`` [K, D]: the kept rows in the
        release's output order.
    """
    variant = check_variant("dycoke", variant, (PAPER, OFFICIAL, VIDCOM2_QWEN))
    if k is not None:
        k = check_range("k", k, 0.0, 1.0)  # the pruned share of a reduced frame
    if variant == OFFICIAL:
        return official_select(frames, OFFICIAL_K if k is None else k)
    if variant == VIDCOM2_QWEN:
        return vidcom2_qwen_select(frames, ratio, k)
    return paper_select(frames, ratio, k)
