"""The registration of ``holitom`` (HoliTom's outer-LLM merge): its facts, parameters, checks and
the dispatch to the variant modules; the package docstring describes the method."""

from __future__ import annotations

from typing import Optional

import torch

from baselines.common import papers
from baselines.common.model_inputs import vision_attention_input
from baselines.holitom.official import official_select
from baselines.holitom.paper import paper_select
from baselines.holitom.params import check_outer_params, resolve_tau
from baselines.holitom.vidcom2_qwen import VIDCOM2_QWEN_TAU, vidcom2_qwen_select
from vcast.method_facts import MethodFacts
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int
from vcast.variants import OFFICIAL, PAPER, VIDCOM2_QWEN, check_variant

HOLITOM_VARIANTS = (PAPER, OFFICIAL, VIDCOM2_QWEN)

FACTS = MethodFacts(
    display="HoliTom",
    venue="NeurIPS'25",
    paper=papers.HOLITOM,
    code={
        PAPER: "cokeshao/HoliTom@e9b2972 holitom/llava_arch.py",
        OFFICIAL: "cokeshao/HoliTom@e9b2972 holitom/llava_arch.py",
        VIDCOM2_QWEN: "xuyang-liu16/VidCom2@a85d485 token_compressor/holitom/{core,holitom}.py",
    },
)


@register_method("holitom", inputs=("vision_attention",), variants=HOLITOM_VARIANTS,
                 variant_inputs={VIDCOM2_QWEN: ()}, facts=FACTS)  # the port ranks by token norms
def holitom_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    tau: Optional[float] = None,
    beta: float = 0.6,
    dominant_fraction: float = 0.0,
    dpc_k: int = 7,
    max_window: int = 1024,
    variant: str = PAPER,
    seed: int = 0,
    vision_attention: Optional[torch.Tensor] = None,
) -> Selection:
    """HoliTom's outer-LLM compression (:mod:`baselines.holitom`) of ``frames`` [T, P, D].

    Args:
        frames: [T, P, D] LLM-space video tokens, any float dtype.
        ratio: retention ratio r in (0, 1].
        tau: static threshold on the same-position cosine, in [-1, 1]; None: 0.8, or 0.65 when
            ``r <= 0.10`` (the official scripts).
        beta: weight of a cluster centre in its merged token, in [0, 1].
        dominant_fraction: the official ``D``, in [0, 1]: a frame with dynamic budget ``c``
            keeps ``round(c * (1 - D))`` tokens by attention and merges the rest into
            ``c - round(c * (1 - D))`` DPC-kNN clusters. 0 (official): pure attention top-k.
        dpc_k: neighbours of the DPC-kNN density (>= 1).
        max_window: longest static window in frames (>= 1; 1 disables windows).
        variant: ``"paper"`` (:mod:`baselines.holitom.paper`), ``"official"`` (the HoliTom release,
            :mod:`baselines.holitom.official`) or ``"vidcom2_qwen"`` (the VidCom2 Qwen port,
            :mod:`baselines.holitom.vidcom2_qwen`); see the package docstring.
        seed: seed of the DPC-kNN density noise of ``"official"`` / ``"vidcom2_qwen"`` (a CPU
            ``torch.Generator``; the global RNG is not used). Ignored by ``"paper"`` (no noise).
        vision_attention: [T, P] attention received per token (required, except by
            ``"vidcom2_qwen"``, which ignores it).
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and ``tokens`` [K, D]: ``"paper"``: float32,
        ``K = floor(r T P)``; the other variants: ``frames``' dtype, the release's count.
    """
    num_frames, tokens_per_frame, _ = frames.shape
    variant = check_variant("holitom", variant, HOLITOM_VARIANTS)
    tau, beta, dominant_fraction, dpc_k, max_window = check_outer_params(tau, beta, dominant_fraction, dpc_k,
                                                                          max_window)
    seed = check_int("seed", seed, 0)
    if variant == VIDCOM2_QWEN:
        return vidcom2_qwen_select(frames, ratio, tau=VIDCOM2_QWEN_TAU if tau is None else tau, beta=beta,
                                   dominant_fraction=dominant_fraction, dpc_k=dpc_k, max_window=max_window, seed=seed)
    attention = vision_attention_input("holitom", vision_attention, num_frames, tokens_per_frame, frames.device)
    threshold = resolve_tau(tau, ratio)
    if variant == OFFICIAL:
        return official_select(frames, ratio, attention, tau=threshold, beta=beta,
                               dominant_fraction=dominant_fraction, dpc_k=dpc_k, max_window=max_window, seed=seed)
    return paper_select(frames, ratio, attention, tau=threshold, beta=beta, dominant_fraction=dominant_fraction,
                        dpc_k=dpc_k, max_window=max_window)
