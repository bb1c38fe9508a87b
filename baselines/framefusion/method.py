"""The ``framefusion`` registration: parameters, defaults, checks and the plan of stages per variant."""

from __future__ import annotations

import functools

from baselines.common import papers
from baselines.framefusion.official import official_choose
from baselines.framefusion.paper import framefusion_choose
from baselines.framefusion_merge.release import RELEASE, RELEASE_BUDGET_LAYERS
from vcast.method_facts import MethodFacts
from vcast.models.llm_plan import SCORE_MODES, LLMInfo, LLMPlan, LLMStage
from vcast.registry import register_llm_method
from vcast.validation import check_choice, check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

PRE_METHOD = "framefusion_merge"
VARIANTS = (PAPER, OFFICIAL)

FACTS = MethodFacts(display="FrameFusion", venue="ICCV'25", paper=papers.FRAMEFUSION,
                    code={PAPER: RELEASE, OFFICIAL: RELEASE})


def default_similarity_bound(llm: LLMInfo) -> float:
    """S_th of the official examples: the family's (``Family.method_defaults["framefusion"]``: 0.5
    for the Qwen families, as the Qwen2-VL example), else 0.6 (the LLaVA-Video example)."""
    return float(llm.method_defaults.get("framefusion", {}).get("similarity_lower_bound", 0.6))


@register_llm_method("framefusion", variants=VARIANTS, facts=FACTS)
def framefusion_plan(ratio: float, llm: LLMInfo, *, cost: float | None = None,
                     similarity_lower_bound: float | None = None, ratio_lower_bound: float = 0.1,
                     num_layers: int | None = None, scores: str = "rows", variant: str = PAPER) -> LLMPlan:
    """FrameFusion: the layer-0 merge before the LLM, then a stage at every boundary 1..L-1.

    Args:
        ratio: r in (0, 1], the layer-averaged share of video tokens (FrameFusion's cost).
        llm: the language model (``paper``: its real depth sets the budget formula's L).
        cost: override of the budget (None: ``cost = r``; the release's default is 0.3).
        similarity_lower_bound: S_th (None: 0.5 for Qwen, 0.6 otherwise).
        ratio_lower_bound: merging stops after a step that removes less than this share.
        num_layers: the budget formula's ``L`` (None: the model's depth for ``paper``, 28 for
            ``official``, the release's hard-coded value).
        scores: "rows" or "eager" (where the last token's attention row comes from).
        variant: ``"paper"`` or ``"official"`` (the release bit for bit in the model's dtype; see
            :mod:`baselines.framefusion` for what the layer-boundary hooks cannot reproduce).
    """
    variant = check_variant("framefusion", variant, VARIANTS)
    cost = check_range("cost", ratio if cost is None else cost, 0.0, 1.0)
    if cost <= 0:
        raise ValueError(f"cost must be in (0, 1], got {cost!r}")
    threshold = (default_similarity_bound(llm) if similarity_lower_bound is None
                 else check_range("similarity_lower_bound", similarity_lower_bound, -1.0, 1.0))
    ratio_lower_bound = check_range("ratio_lower_bound", ratio_lower_bound, 0.0, 1.0)
    scores = check_choice("scores", scores, SCORE_MODES)
    budget_layers = None if num_layers is None else check_int("num_layers", num_layers, 1)
    if variant == OFFICIAL:
        budget_layers = RELEASE_BUDGET_LAYERS if budget_layers is None else budget_layers
        choose = functools.partial(official_choose, cost=cost, threshold=threshold,
                                   ratio_lower_bound=ratio_lower_bound, budget_layers=budget_layers)
        stages = tuple(LLMStage(layer=layer, choose=choose, queries="last", score_layer=layer - 1)
                       for layer in range(1, llm.num_layers))
        return LLMPlan(stages=stages, pre_method=PRE_METHOD, pre_ratio=cost,
                       pre_params={"threshold": threshold, "num_layers": budget_layers, "variant": OFFICIAL},
                       positions="original", scores=scores, score_dtype="model", score_scale="multiply")
    extra = {} if budget_layers is None else {"budget_layers": budget_layers}
    choose = functools.partial(framefusion_choose, cost=cost, threshold=threshold,
                               ratio_lower_bound=ratio_lower_bound, **extra)
    stages = tuple(LLMStage(layer=layer, choose=choose, queries="last", score_layer=layer - 1)
                   for layer in range(1, llm.num_layers))
    return LLMPlan(stages=stages, pre_method=PRE_METHOD, pre_ratio=cost, pre_params={"threshold": threshold},
                   positions="original", scores=scores)
