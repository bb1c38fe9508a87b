"""The ``fastv`` registration: parameters, defaults, the budget rule and the plan per variant."""

from __future__ import annotations

from typing import Optional

from baselines.fastv.official import official_top
from baselines.fastv.paper import top_share
from baselines.fastv.vidcom2_qwen import vidcom2_top
from vcast.method_facts import MethodFacts
from vcast.models.llm_plan import LLMInfo, LLMPlan, LLMStage
from vcast.registry import register_llm_method
from vcast.validation import check_choice, check_int
from vcast.variants import OFFICIAL, PAPER, VIDCOM2_QWEN, check_variant

BUDGETS = ("after_drop", "layer_average")
VARIANTS = (PAPER, OFFICIAL, VIDCOM2_QWEN)
FASTV_K = 2  # the layer whose attention ranks the tokens (paper, official: the drop is before K)
VIDCOM2_FASTV_K = 2  # the port's FASTV_K: it prunes after layer K, i.e. before layer K + 1

RELEASE_CODE = (  # the HF-LLaVA path both paper and official follow
    "pkunlp-icler/FastV@d165972 src/FastV/llava-hf/transformers/src/transformers/models/llama/modeling_llama.py"
)

FACTS = MethodFacts(
    display="FastV",
    venue="ECCV'24",
    paper=('"An Image is Worth 1/2 Tokens After Layer 2: Plug-and-Play Inference Acceleration for Large '
           'Vision-Language Models" (Chen et al., ECCV 2024)'),
    code={
        PAPER: RELEASE_CODE,
        OFFICIAL: RELEASE_CODE,
        VIDCOM2_QWEN: "xuyang-liu16/VidCom2@e19a4bd token_compressor/fastv/{fastv.py,models/qwen3_vl.py}",
    },
)


def single_drop_keep(ratio: float, layer: int, num_layers: int, budget: str) -> float:
    """Share of the entering video tokens one drop before ``layer`` keeps, under ``budget``."""
    if budget == "after_drop":
        return ratio
    keep = (ratio * num_layers - layer) / (num_layers - layer)
    if keep <= 0:
        raise ValueError(f"budget='layer_average' cannot reach ratio {ratio} with a drop before layer {layer} of "
                         f"{num_layers}: the first {layer} layers alone already see {layer / num_layers:.3f}")
    return keep


@register_llm_method("fastv", variants=VARIANTS, facts=FACTS)
def fastv_plan(ratio: float, llm: LLMInfo, *, layer: Optional[int] = None, budget: str = "after_drop",
               scores: str = "rows", variant: str = PAPER) -> LLMPlan:
    """One drop before ``layer`` (None: 2, or 3 for ``vidcom2_qwen``); see :mod:`baselines.fastv`."""
    variant = check_variant("fastv", variant, VARIANTS)
    default_layer = VIDCOM2_FASTV_K + 1 if variant == VIDCOM2_QWEN else FASTV_K
    layer = (min(default_layer, llm.num_layers - 1) if layer is None
             else check_int("layer", layer, 1, llm.num_layers - 1))
    budget = check_choice("budget", budget, BUDGETS)
    keep = single_drop_keep(ratio, layer, llm.num_layers, budget)
    if variant == PAPER:
        stage = LLMStage(layer=layer, queries="last", choose=lambda inputs: top_share(inputs, keep))
        return LLMPlan(stages=(stage,), positions="original", scores=scores)
    if variant == OFFICIAL:
        stage = LLMStage(layer=layer, queries="last", choose=lambda inputs: official_top(inputs, keep))
        return LLMPlan(stages=(stage,), positions="original", scores=scores, score_dtype="model")
    stage = LLMStage(layer=layer, queries="all", choose=lambda inputs: vidcom2_top(inputs, keep))
    return LLMPlan(stages=(stage,), positions="original", scores=scores, score_dtype="model", deepstack="before",
                   post_drop_causal="original_positions")
