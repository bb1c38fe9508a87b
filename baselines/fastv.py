"""FastV: prune visual tokens once inside the LLM by the last token's attention.

Paper: "An Image is Worth 1/2 Tokens After Layer 2: Plug-and-Play Inference Acceleration for
Large Vision-Language Models" (Chen et al., ECCV 2024).
Official code followed: pkunlp-icler/FastV@d165972, the HF-LLaVA path with its "static KV-cache
pruning" (inllm_methods.md section 3): layers ``0..K-1`` see every token; the head-mean
attention row of the **last prompt token** at layer ``K - 1`` ranks the video tokens; the top
``round(N * keep)`` stay for layers ``K..L-1``, at their original positions (gaps stay); the
KV cache of layers ``< K`` keeps everything; decode steps do not prune.

Defaults: ``layer = 2`` (the paper's K = 2, on every model depth; ``min(2, L - 1)`` on a
test model of fewer than 3 layers). ``budget="after_drop"``:
the retention ratio ``r`` is the share kept after the drop (FastV's ``1 - R``); the tokens
then seen per layer average ``rho = (K + (L - K) r) / L`` (30.4% at r = 0.25 on 28 layers),
which the stats report next to ``r``. ``budget="layer_average"`` instead solves
``keep = (r L - K) / (L - K)`` so that ``rho = r`` (19.2% kept on 28 layers at r = 0.25).

Scores: ``scores="rows"`` (default) recomputes just that row next to SDPA / FlashAttention
(``vcast.models.attention_rows``); ``scores="eager"`` reads it from the eager attention's
weights, as the official code does (model loaded with ``attn_implementation="eager"``).

Deviations: the official code hard-codes batch row 0 and one image span; here every batch row
and every video of a row are ranked together per row. Ties go to the lower index.
"""

from __future__ import annotations

import math
from typing import Optional
from baselines.dpc_knn import top_indices
from vcast.models.llm_plan import LLMInfo, LLMPlan, LLMStage, StageChoice, StageInputs
from vcast.registry import register_llm_method
from vcast.validation import check_choice, check_int

BUDGETS = ("after_drop", "layer_average")


def single_drop_keep(ratio: float, layer: int, num_layers: int, budget: str) -> float:
    """Share of the entering video tokens one drop before ``layer`` keeps, under ``budget``."""
    if budget == "after_drop":
        return ratio
    keep = (ratio * num_layers - layer) / (num_layers - layer)
    if keep <= 0:
        raise ValueError(f"budget='layer_average' cannot reach ratio {ratio} with a drop before layer {layer} of "
                         f"{num_layers}: the first {layer} layers alone already see {layer / num_layers:.3f}")
    return keep


def last_token_scores(inputs: StageInputs):
    """float32 ``[N]``: head-mean attention of the last prompt token to each video token."""
    return inputs.attention.mean(0)[-1].index_select(0, inputs.visual)


def top_share(inputs: StageInputs, keep: float) -> StageChoice:
    """Keep the ``round(N * keep)`` (at least 1) video tokens with the highest last-token attention."""
    count = min(inputs.visual.numel(), max(1, math.floor(inputs.visual.numel() * keep + 0.5)))
    return StageChoice(keep=top_indices(last_token_scores(inputs), count))


@register_llm_method("fastv")
def fastv_plan(ratio: float, llm: LLMInfo, *, layer: Optional[int] = None, budget: str = "after_drop",
               scores: str = "rows") -> LLMPlan:
    """One drop before ``layer`` (None: 2); see the module docstring."""
    layer = min(2, llm.num_layers - 1) if layer is None else check_int("layer", layer, 1, llm.num_layers - 1)
    budget = check_choice("budget", budget, BUDGETS)
    keep = single_drop_keep(ratio, layer, llm.num_layers, budget)
    stage = LLMStage(layer=layer, queries="last", choose=lambda inputs: top_share(inputs, keep))
    return LLMPlan(stages=(stage,), positions="original", scores=scores)
