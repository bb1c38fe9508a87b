"""The ``prunevid`` registration: parameters, defaults, checks and dispatch to the variant plans."""

from __future__ import annotations

from typing import Optional

from baselines.common import papers
from baselines.prunevid.defaults import default_selected_layer, split_ratio
from baselines.prunevid.official import official_plan
from baselines.prunevid.paper import paper_plan
from baselines.prunevid_stage_a.params import check_stage_a_params
from vcast.method_facts import MethodFacts
from vcast.models.llm_plan import LLMInfo, LLMPlan
from vcast.registry import register_llm_method
from vcast.validation import check_int
from vcast.variants import OFFICIAL, PAPER, check_variant

VARIANTS = (PAPER, OFFICIAL)

FACTS = MethodFacts(
    display="PruneVid",
    venue="ACL'25",
    paper=papers.PRUNEVID,
    code={OFFICIAL: "Visual-AI/PruneVid@b12600c models/pllava/elastic_cache.py process_attention"},
)


@register_llm_method("prunevid", variants=VARIANTS, facts=FACTS)
def prunevid_plan(ratio: float, llm: LLMInfo, *, alpha: Optional[float] = None,
                  cluster_ratio: Optional[float] = None, selected_layer: Optional[int] = None,
                  tau: float = 0.8, temporal_segment_ratio: float = 0.25, dpc_k: int = 7,
                  min_cluster_tokens: int = 14, variant: str = PAPER, seed: int = 0) -> LLMPlan:
    """Stage A (``prunevid_stage_a`` at ``cluster_ratio``) before the LLM, stage B after layer
    ``selected_layer``; see the :mod:`baselines.prunevid` docstring.

    Args:
        ratio: nominal share of the original video tokens kept after stage B (``gamma * alpha``).
        alpha: stage B's share per frame in [0, 1] (>= ratio); None: ratio / gamma.
        cluster_ratio: stage A's share gamma in [0, 1] (>= ratio); None: max(0.5, sqrt(ratio)),
            or ratio / alpha when ``alpha`` is given.
        selected_layer: ``S_sel`` in ``[0, L - 2]``, the layer whose attention ranks the tokens
            (layers after it see the kept ones); None: the official 10 of 32, scaled.
        tau, temporal_segment_ratio, dpc_k, min_cluster_tokens: stage A's (``prunevid_stage_a``).
        variant: ``"paper"`` or ``"official"`` (the :mod:`baselines.prunevid` docstring).
        seed: stage A's density noise under ``variant="official"`` (``"paper"`` has none).
    """
    variant = check_variant("prunevid", variant, VARIANTS)
    seed = check_int("seed", seed, 0)
    gamma, share = split_ratio(ratio, alpha, cluster_ratio)
    if selected_layer is None:
        selected_layer = default_selected_layer(llm.num_layers)
    selected_layer = check_int("selected_layer", selected_layer, 0, llm.num_layers - 2)
    # Stage A's own checks, at plan time (attach also dry-runs it).
    tau, temporal_segment_ratio, dpc_k, min_cluster_tokens = check_stage_a_params(
        tau, temporal_segment_ratio, dpc_k, min_cluster_tokens)
    stage_a = {"tau": tau, "temporal_segment_ratio": temporal_segment_ratio, "dpc_k": dpc_k,
               "min_cluster_tokens": min_cluster_tokens}
    if variant == OFFICIAL:  # the release's float alpha, int() counts, scores in the model's dtype
        alpha_float = float(share) if alpha is None else float(alpha)
        return official_plan(gamma, alpha_float, selected_layer, stage_a, seed)
    return paper_plan(gamma, share, selected_layer, stage_a)
