"""The ``sparsevlm`` registration: parameters, defaults, checks and the plan of stages per variant."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import pairwise

from baselines.sparsevlm.official import official_choose
from baselines.sparsevlm.paper import sparsevlm_choose
from baselines.sparsevlm.schedule import (
    OFFICIAL_COUNTS,
    OFFICIAL_TOKENS,
    REFERENCE_RATIO,
    default_stage_layers,
    stage_counts,
)
from vcast.method_facts import MethodFacts
from vcast.models.llm_plan import (
    SCORE_MODES,
    LLMInfo,
    LLMPlan,
    LLMStage,
    StageChoice,
    StageInputs,
)
from vcast.registry import register_llm_method
from vcast.validation import check_choice, check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

VARIANTS = (PAPER, OFFICIAL)

FACTS = MethodFacts(
    display="SparseVLM",
    venue="ICML'25",
    paper=('"SparseVLM: Visual Token Sparsification for Efficient Vision-Language Model Inference" '
           '(Zhang et al., ICML 2025)'),
    code={
        PAPER: "Gumpest/SparseVLMs@26a5f48 llava/model/language_model/modelling_sparse_llama.py",
        OFFICIAL: "Gumpest/SparseVLMs@26a5f48 llava/model/language_model/modelling_sparse_llama.py",
    },
)


def check_layers(layers: object, num_layers: int) -> list[int]:
    """SparseVLM layers ``l`` strictly increasing in ``[0, L - 2]`` (ValueError naming ``layers``)."""
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence) or len(layers) == 0:
        raise ValueError(f"layers must be a non-empty list of layer indices, got {layers!r}")
    if num_layers < 2:
        raise ValueError(f"layers: a {num_layers}-layer language model has no layer to prune after")
    values = [check_int("layers", layer, 0, num_layers - 2) for layer in layers]
    if any(b <= a for a, b in pairwise(values)):
        raise ValueError(f"layers must increase strictly, got {values}")
    return values


def check_fractions(fractions: object, stages: int) -> list[float]:
    """One share in ``(0, 1]`` per stage (ValueError naming ``fractions``)."""
    if isinstance(fractions, (str, bytes)) or not isinstance(fractions, Sequence):
        raise ValueError(f"fractions must be a list of shares in (0, 1], got {fractions!r}")
    if len(fractions) != stages:
        raise ValueError(f"fractions must have one share per pruning layer ({stages}), got {len(fractions)}")
    values = [check_range("fractions", value, 0.0, 1.0) for value in fractions]
    if min(values) == 0.0:
        raise ValueError(f"fractions must be in (0, 1], got {values}")
    return values


def check_counts(counts: object, stages: int) -> list[int]:
    """One absolute count ``>= 1`` per stage (ValueError naming ``counts``)."""
    if isinstance(counts, (str, bytes)) or not isinstance(counts, Sequence):
        raise ValueError(f"counts must be a list of token counts, got {counts!r}")
    if len(counts) != stages:
        raise ValueError(f"counts must have one count per pruning layer ({stages}), got {len(counts)}")
    return [check_int("counts", count, 1) for count in counts]


@register_llm_method("sparsevlm", variants=VARIANTS, facts=FACTS)
def sparsevlm_plan(ratio: float, llm: LLMInfo, *, layers: Sequence[int] | None = None,
                   fractions: Sequence[float] | None = None, counts: Sequence[int] | None = None,
                   recycling: bool = True, scores: str = "rows", variant: str = PAPER,
                   seed: int = 0) -> LLMPlan:
    """Prune after each SparseVLM layer ``l`` (our stage ``l + 1``); see :mod:`baselines.sparsevlm`."""
    variant = check_variant("sparsevlm", variant, VARIANTS)
    seed = check_int("seed", seed, 0)
    scores = check_choice("scores", scores, SCORE_MODES)
    if not isinstance(recycling, bool):
        raise ValueError(f"recycling must be True or False, got {recycling!r}")
    if layers is None:
        stage_layers = default_stage_layers(llm.num_layers)
    else:
        stage_layers = [layer + 1 for layer in check_layers(layers, llm.num_layers)]
    if counts is not None:  # absolute counts (the release's lists), used as given
        if fractions is not None:
            raise ValueError("give at most one of fractions and counts")
        shares = check_counts(counts, len(stage_layers))
        scale = 1.0
    elif fractions is None:
        shares = [count / OFFICIAL_TOKENS for count in OFFICIAL_COUNTS]
        if len(shares) != len(stage_layers):
            raise ValueError(f"fractions must be given for the {len(stage_layers)} layers {list(layers)} "
                             f"(the default schedule has {len(shares)})")
        scale = ratio / REFERENCE_RATIO
    else:
        shares = check_fractions(fractions, len(stage_layers))
        scale = 1.0
    # Drops scheduled on one layer become one stage with the last (smallest) count among them.
    schedule: dict[int, float] = {}
    for layer, share in zip(stage_layers, shares):
        schedule[layer] = share
    logger.debug("SparseVLM on %d layers: stages %s, shares of N0 %s (x %.3f)", llm.num_layers, list(schedule),
                 list(schedule.values()), scale)

    def make_choose(share: float):
        def choose(inputs: StageInputs) -> StageChoice:
            count = int(share) if counts is not None else stage_counts([share], scale, inputs.entry_tokens)[0]
            if variant == OFFICIAL:
                return official_choose(inputs, count, recycling, seed)
            return sparsevlm_choose(inputs, count, recycling)

        return choose

    stages = tuple(LLMStage(layer=layer, queries="text", score_layer=layer - 1, choose=make_choose(share))
                   for layer, share in sorted(schedule.items()))
    if variant == OFFICIAL:  # the release's attention probabilities and head means in the model's dtype
        return LLMPlan(stages=stages, positions="compact", scores=scores, score_dtype="model")
    return LLMPlan(stages=stages, positions="compact", scores=scores)
