"""The registration of ``holitom_llm`` (HoliTom's outer merge, then its inner-LLM merge): its facts,
parameters, checks and the plan that dispatches to the variant modules; the package docstring
describes the method."""

from __future__ import annotations

from typing import Optional

from baselines.common import papers
from baselines.holitom.params import check_outer_params
from baselines.holitom_llm.budget import BUDGETS, outer_ratio
from baselines.holitom_llm.official import official_inner_choose
from baselines.holitom_llm.paper import inner_choose
from vcast.method_facts import MethodFacts
from vcast.models.llm_plan import SCORE_MODES, LLMInfo, LLMPlan, LLMStage, layer_scaled
from vcast.registry import register_llm_method
from vcast.validation import check_choice, check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

REFERENCE_LAYERS = 28  # Qwen2-7B (LLaVA-OneVision / LLaVA-Video)
REFERENCE_LAYER = 18  # HOLITOM_k in the official scripts
HOLITOM_LLM_VARIANTS = (PAPER, OFFICIAL)

FACTS = MethodFacts(
    display="HoliTom (+ in-LLM merge)",
    venue="NeurIPS'25",
    paper=papers.HOLITOM,
    code={
        PAPER: "cokeshao/HoliTom@e9b2972 holitom/modeling_qwen2.py",
        OFFICIAL: "cokeshao/HoliTom@e9b2972 holitom/modeling_qwen2.py",
    },
)


@register_llm_method("holitom_llm", inputs=("vision_attention",), variants=HOLITOM_LLM_VARIANTS, facts=FACTS)
def holitom_llm_plan(ratio: float, llm: LLMInfo, *, layer: Optional[int] = None, r_inner: float = 0.5,
                     budget: str = "pre_llm", scores: str = "rows", tau: Optional[float] = None,
                     beta: float = 0.6, dominant_fraction: float = 0.0, dpc_k: int = 7,
                     max_window: int = 1024, variant: str = PAPER, seed: int = 0) -> LLMPlan:
    """HoliTom's outer merge (``holitom``) before the LLM, its inner merge before ``layer``; see
    :mod:`baselines.holitom_llm`.

    Args:
        ratio: retention ratio, read as ``budget`` says.
        layer: ``K`` in ``[1, L - 1]`` (the official ``HOLITOM_k``); None: 18 of 28, scaled.
        r_inner: share of the video tokens merged away at ``K``, in [0, 1) (``HOLITOM_r``).
        budget: ``"pre_llm"``, ``"after_drop"`` or ``"layer_average"``.
        scores: ``"rows"`` or ``"eager"``.
        tau, beta, dominant_fraction, dpc_k, max_window: the outer step's (``holitom``).
        variant: ``"paper"`` or ``"official"`` (both steps as released; package docstring).
        seed: the outer step's DPC-kNN noise seed (``"official"`` only).
    """
    variant = check_variant("holitom_llm", variant, HOLITOM_LLM_VARIANTS)
    seed = check_int("seed", seed, 0)
    if layer is None:
        layer = layer_scaled(REFERENCE_LAYER, REFERENCE_LAYERS, llm.num_layers)
    layer = check_int("layer", layer, 1, llm.num_layers - 1)
    r_inner = check_range("r_inner", r_inner, 0.0, 1.0)
    if r_inner >= 1.0:
        raise ValueError(f"r_inner must be in [0, 1) (the share merged away), got {r_inner!r}")
    budget = check_choice("budget", budget, BUDGETS)
    scores = check_choice("scores", scores, SCORE_MODES)
    # The outer step's own checks, at plan time (attach also dry-runs it).
    tau, beta, dominant_fraction, dpc_k, max_window = check_outer_params(tau, beta, dominant_fraction, dpc_k,
                                                                          max_window)
    choose = official_inner_choose if variant == OFFICIAL else inner_choose
    stage = LLMStage(layer=layer, queries="last", score_layer=layer - 1,
                     choose=lambda inputs: choose(inputs, r_inner))
    pre_params = {"tau": tau, "beta": beta, "dominant_fraction": dominant_fraction, "dpc_k": dpc_k,
                  "max_window": max_window}
    if variant == OFFICIAL:
        pre_params.update(variant=OFFICIAL, seed=seed)
    return LLMPlan(
        stages=(stage,), pre_method="holitom",
        pre_ratio=outer_ratio(ratio, budget, layer, llm.num_layers, r_inner),
        pre_params=pre_params, positions="original", scores=scores,
    )
