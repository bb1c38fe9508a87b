"""The ``pdrop`` registration: parameters, defaults, checks and the plan of stages per variant."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import pairwise

from baselines.pdrop.official import official_choose
from baselines.pdrop.paper import pdrop_choose
from baselines.pdrop.schedule import default_layer_list, layer_average, solve_lambda
from vcast.method_facts import MethodFacts
from vcast.models.llm_plan import LLMInfo, LLMPlan, LLMStage, layer_averaged_retention
from vcast.registry import register_llm_method
from vcast.validation import check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

VARIANTS = (PAPER, OFFICIAL)

FACTS = MethodFacts(
    display="PDrop",
    venue="CVPR'25",
    paper=('"PyramidDrop: Accelerating Your Large Vision-Language Models via Pyramid Visual Redundancy '
           'Reduction" (Xing et al., CVPR 2025)'),
    code={
        PAPER: "Cooperx521/PyramidDrop@6444f30 llava/model/modeling_llama_pdrop.py",
        OFFICIAL: "Cooperx521/PyramidDrop@6444f30 llava/model/modeling_llama_pdrop.py pdrop_rank_drop",
    },
)


def check_layer_list(layer_list: object, num_layers: int) -> list[int]:
    """``layer_list`` as a list of strictly increasing integers in ``[1, L - 1]`` (ValueError naming it)."""
    if isinstance(layer_list, (str, bytes)) or not isinstance(layer_list, Sequence) or len(layer_list) == 0:
        raise ValueError(f"layer_list must be a non-empty list of layer indices, got {layer_list!r}")
    layers = [check_int("layer_list", layer, 1, num_layers - 1) for layer in layer_list]
    if any(b <= a for a, b in pairwise(layers)):
        raise ValueError(f"layer_list must increase strictly, got {layers}")
    return layers


def check_ratio_list(ratio_list: object, stages: int) -> list[float]:
    """``ratio_list`` as one share in ``[0, 1]`` per stage (ValueError naming it)."""
    if isinstance(ratio_list, (str, bytes)) or not isinstance(ratio_list, Sequence) or len(ratio_list) != stages:
        raise ValueError(f"ratio_list must give one share per stage ({stages}), got {ratio_list!r}")
    return [check_range("ratio_list", share, 0.0, 1.0) for share in ratio_list]


@register_llm_method("pdrop", variants=VARIANTS, facts=FACTS)
def pdrop_plan(ratio: float, llm: LLMInfo, *, layer_list: Sequence[int] | None = None,
               lam: float | None = None, ratio_list: Sequence[float] | None = None,
               variant: str = PAPER) -> LLMPlan:
    """Drops before each layer of ``layer_list``, shares ``lam^i`` of the entry count; see :mod:`baselines.pdrop`."""
    variant = check_variant("pdrop", variant, VARIANTS)
    layers = default_layer_list(llm.num_layers) if layer_list is None else check_layer_list(layer_list, llm.num_layers)
    if ratio_list is not None:
        if variant != OFFICIAL:
            raise ValueError("ratio_list belongs to variant='official' (variant='paper' uses lam)")
        if lam is not None:
            raise ValueError("give lam or ratio_list, not both")
        shares = check_ratio_list(ratio_list, len(layers))
        logger.debug("PDrop (official) on %d layers: layer_list %s, ratio_list %s, layer-averaged retention %.4f",
                     llm.num_layers, layers, shares, layer_averaged_retention(1.0, layers, shares, llm.num_layers))
        return _official_plan(layers, shares)
    if lam is None:
        lam = solve_lambda(ratio, layers, llm.num_layers)
    else:
        lam = check_range("lam", lam, 0.0, 1.0)
        if lam == 0.0:
            raise ValueError("lam must be in (0, 1], got 0")
    logger.debug("PDrop on %d layers: layer_list %s, lam %.6f, layer-averaged retention %.4f", llm.num_layers,
                 layers, lam, layer_average(lam, layers, llm.num_layers))
    if variant == OFFICIAL:
        return _official_plan(layers, [lam ** (i + 1) for i in range(len(layers))])
    stages = tuple(
        LLMStage(layer=layer, queries="last", score_layer=layer, choose=lambda inputs, lam=lam: pdrop_choose(inputs, lam))
        for layer in layers
    )
    return LLMPlan(stages=stages, positions="compact")


def _official_plan(layers: Sequence[int], shares: Sequence[float]) -> LLMPlan:
    """The release's stages: next layer's weights, scores in the model's dtype divided by ``sqrt(head_dim)``."""
    shares = tuple(shares)
    stages = tuple(
        LLMStage(layer=layer, queries="last", score_layer=layer,
                 choose=lambda inputs, shares=shares: official_choose(inputs, shares))
        for layer in layers
    )
    return LLMPlan(stages=stages, positions="compact", score_dtype="model", score_scale="divide")
