"""The ``flashvid`` registration: parameters, the per-family defaults, checks and dispatch to the
variant modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from baselines.common import papers
from baselines.flashvid.official import official_plan
from baselines.flashvid.paper import paper_plan
from baselines.flashvid_merge.params import check_merge_params
from vcast.method_facts import MethodFacts
from vcast.models.llm_plan import SCORE_MODES, LLMInfo, LLMPlan, layer_scaled
from vcast.registry import register_llm_method
from vcast.validation import check_choice, check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

FACTS = MethodFacts(
    display="FlashVID",
    venue="ICLR'26",
    paper=papers.FLASHVID,
    code={OFFICIAL: "Fanziyang-v/FlashVID@1d37422 flashvid/utils.py fastv_prune"},
)

VARIANTS = (PAPER, OFFICIAL)


@dataclass(frozen=True)
class FamilyDefaults:
    """The official script values of one model family (``layer`` given for ``reference_layers``)."""

    layer: int
    reference_layers: int
    llm_retention: float
    min_segment_num: int
    selection: str
    score_scale: str  # how the release's manual score row scales q k^T (differs in bf16)


def family_defaults(llm: LLMInfo) -> Optional[FamilyDefaults]:
    """The official script values of ``llm``'s family, declared by the family's package
    (``Family.method_defaults["flashvid"]``, e.g. ``vcast/families/qwen3_vl/__init__.py``), or None."""
    values = llm.method_defaults.get("flashvid")
    return None if values is None else FamilyDefaults(**values)


@register_llm_method("flashvid", inputs=("vision_attention",), variants=VARIANTS, facts=FACTS)
def flashvid_plan(ratio: float, llm: LLMInfo, *, layer: int | None = None,
                  llm_retention: float | None = None, min_segment_num: int | None = None,
                  selection: str | None = None, alpha: float = 0.7, expansion: float = 1.25,
                  segment_threshold: float = 0.9, temporal_threshold: float = 0.8,
                  scores: str = "rows", variant: str = PAPER, seed: int = 0) -> LLMPlan:
    """``flashvid_merge`` before the LLM, one top-attention drop before ``layer``; None values take
    the official value of ``llm.family`` (see :mod:`baselines.flashvid`). ``variant`` applies to both
    steps; ``seed`` is passed to the pre-LLM step under ``"official"``."""
    variant = check_variant("flashvid", variant, VARIANTS)
    seed = check_int("seed", seed, 0)
    defaults = family_defaults(llm)
    if defaults is None and None in (layer, llm_retention, min_segment_num, selection):
        raise ValueError(f"flashvid has no official defaults for the {llm.family} family (its release has no "
                         "script for it); pass layer, llm_retention, min_segment_num and selection")
    if layer is None:
        layer = layer_scaled(defaults.layer, defaults.reference_layers, llm.num_layers)
    layer = check_int("layer", layer, 1, llm.num_layers - 1)
    llm_retention = defaults.llm_retention if llm_retention is None else llm_retention
    check_range("llm_retention", llm_retention, 0.0, 1.0)
    if llm_retention == 0:
        raise ValueError("llm_retention must be in (0, 1], got 0")
    min_segment_num = defaults.min_segment_num if min_segment_num is None else min_segment_num
    selection = defaults.selection if selection is None else selection
    check_merge_params(selection, alpha, expansion, segment_threshold, min_segment_num, temporal_threshold)
    scores = check_choice("scores", scores, SCORE_MODES)
    pre_params = {"selection": selection, "alpha": alpha, "expansion": expansion,
                  "segment_threshold": segment_threshold, "min_segment_num": min_segment_num,
                  "temporal_threshold": temporal_threshold}
    if variant == PAPER:
        return paper_plan(ratio, layer=layer, llm_retention=llm_retention, pre_params=pre_params, scores=scores)
    # An unknown family with every value given: "multiply".
    score_scale = defaults.score_scale if defaults is not None else "multiply"
    return official_plan(ratio, layer=layer, llm_retention=llm_retention, pre_params=pre_params, scores=scores,
                         seed=seed, score_scale=score_scale)
