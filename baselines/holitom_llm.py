"""HoliTom, outer-LLM merge followed by its inner-LLM merge (``holitom_llm``).

Paper: "HoliTom: Holistic Token Merging for Fast Video Large Language Models" (Shao et al.,
NeurIPS 2025). Official code followed: cokeshao/HoliTom@e9b2972: the outer-LLM part is the
registered compressor ``holitom`` (``baselines/holitom.py``, reference_methods.md section 7.1; its
header lists its own deviations); the inner-LLM part (this file) is ``holitom/modeling_qwen2.py``
L120-225, enabled there by ``HOLITOM_k`` / ``HOLITOM_r`` (reference_methods.md section 7.2).

Variants (keyword ``variant``): ``"paper"`` (default; the steps below) and ``"official"``: the
outer step runs ``holitom`` with ``variant="official"`` (and ``seed``), and the inner step is the
release's, bit for bit on CPU in float32 and bf16 (:func:`official_inner_choose`): scores = head
mean **in the model dtype** of the last token's attention cast to it (eager's
``softmax(float32).to(dtype)``), ``topk(round(N (1 - r_inner)))`` in ``topk``'s order, similarities
``bmm / (norm * norm)`` in the model dtype (no eps: a zero state gives NaN, as released), each
non-top token (ascending) to ``torch.max``'s index, then ``h_t <- (h_t + h_j) / 2`` **sequentially
in the model dtype**, rounding at every step (run by merge round, which rounds identically).
Measured against the release's merge block (``holitom/modeling_qwen2.py``, exec'd from its own
lines on the same hidden states and eager attention): fp32 150/150, bf16 150/150 exact kept
positions and hidden states (a comparison outside the project, docs/fidelity.md).
Deviations of ``"official"`` kept: the release's visual span includes LLaVA's newline token
(``N`` counts it, it can be merged away); here ``N`` is the video tokens only and the newline
always stays (the engine treats it as text); ``round(N (1 - r_inner)) = 0`` makes the release
fail, here one token stays; the scores come from the engine's attention rows (``scores="rows"``
recomputes them in float32; ``scores="eager"`` reads the eager weights, as the release) and
every row / video is handled (the release: batch row 0's one image span). Defaults are those
of ``"paper"`` (``HOLITOM_k = 18`` scaled, ``r_inner = 0.5``: the scripts).

Inner step (``"paper"``), one stage at layer ``K`` (the official ``HOLITOM_k``): after layer ``K - 1`` has run,

1. the head-mean softmax attention of the **last prompt token** at layer ``K - 1`` ranks the
   ``N`` video tokens present (``queries="last"``, RoPE and causal mask as the model has them);
2. the top ``round(N (1 - r_inner))`` stay (Python ``round`` as the official code, at least 1);
3. every other ("non-top") token is merged into the kept token whose hidden state is most
   cosine-similar (similarities taken once, on the hidden states entering layer ``K``), going
   through the non-top tokens in sequence order and updating ``h_t <- (h_t + h_j) / 2`` each time
   (the official Python loop). A non-top token is never updated and the similarities are fixed,
   so the loop has a closed form, computed here vectorised: a kept token ``t`` that receives
   ``m`` tokens ``j_1 < ... < j_m`` ends as ``2^-m h_t + sum_k 2^-(m - k + 1) h_{j_k}`` (the later a
   token comes, the more it weighs, exactly as the sequential update); tested against the loop;
4. layers ``K..L-1`` see the kept tokens only, at their original positions
   (``positions="original"``: gaps stay, as the official ``position_ids = keep_indexs``; Qwen3-VL
   keeps its original MRoPE coordinates); the KV cache of layers ``< K`` keeps every token (as
   the official code: it prunes the hidden states only).

Defaults (official scripts): ``HOLITOM_k = 18`` of Qwen2-7B's 28 layers, moved to other depths
with :func:`vcast.models.llm_plan.layer_scaled` (36 layers -> 23, 32 -> 21, 3 -> 2, 2 -> 1);
``r_inner = 0.5`` (the official ``HOLITOM_r``: the share merged away). Outer-LLM parameters
(``tau``, ``beta``, ``dominant_fraction``, ``dpc_k``, ``max_window``) are passed to ``holitom`` with
its defaults (official). Model input: ``vision_attention`` [T, P] for the outer step (supplied by
the adapters: the vision encoder's feature-layer attention, column mean over heads and queries).

Retention ratio ``r`` (``budget``):

* ``"pre_llm"`` (default, HoliTom's own convention: ``RETAIN_RATIO`` is the outer-LLM ratio): the
  outer step keeps ``floor(r T P)`` tokens; after layer ``K`` about ``r (1 - r_inner)`` of the
  original tokens remain, and the tokens seen per layer average
  ``rho = r (K + (L - K)(1 - r_inner)) / L`` (20.5% at r = 0.25 on 28 layers: 25% for 18 layers, 12.5% for 10), which the engine
  reports next to ``r``;
* ``"after_drop"``: ``r`` is the share left after layer ``K``: the outer ratio is ``r / (1 - r_inner)``;
* ``"layer_average"``: ``r`` is ``rho``: the outer ratio is ``r L / (K + (L - K)(1 - r_inner))``.

The last two need an outer ratio <= 1 (ValueError naming ``ratio`` otherwise).

Scores: ``scores="rows"`` (default) recomputes the last row next to SDPA / FlashAttention
(``vcast.models.attention_rows``); ``scores="eager"`` reads it from the eager attention's
weights, as the official code does (model loaded with ``attn_implementation="eager"``).

Deliberate deviations of ``"paper"`` from the official code:

* the official visual span (``image_token_posi`` / ``image_tokens``) includes the newline
  token(s) LLaVA lays out after the video; here only the video tokens are ranked and merged
  (newlines are text to the engine and always stay);
* the merge is computed in float32 in closed form and written back once in the model dtype (the
  official loop updates the bf16 hidden states in place, rounding at every step);
* ties go to the lower index: the top-k by attention, and the most similar kept token (kept
  tokens in sequence order; the official argmax runs over ``torch.topk`` order);
* at least one video token stays (``round(N (1 - r_inner))`` can be 0 for tiny inputs);
* every batch row and every video of a row is ranked (several videos of a row together); the
  official code hard-codes one image span of batch row 0;
* cosine similarity uses ``F.normalize`` (eps 1e-12): a zero hidden state has similarity 0
  instead of the official NaN.
"""

from __future__ import annotations

import logging
from typing import Optional

import torch

from baselines.common.dpc_knn import top_indices
from baselines.common.llm_scores import last_token_scores
from baselines.holitom import check_outer_params
from vcast.models.llm_plan import (
    SCORE_MODES,
    LLMInfo,
    LLMPlan,
    LLMStage,
    StageChoice,
    StageInputs,
    layer_scaled,
)
from vcast.registry import register_llm_method
from vcast.validation import check_choice, check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

REFERENCE_LAYERS = 28  # Qwen2-7B (LLaVA-OneVision / LLaVA-Video)
REFERENCE_LAYER = 18  # HOLITOM_k in the official scripts
BUDGETS = ("pre_llm", "after_drop", "layer_average")
HOLITOM_LLM_VARIANTS = (PAPER, OFFICIAL)


def inner_keep_count(num_tokens: int, r_inner: float) -> int:
    """``round(N (1 - r_inner))`` (Python's round, as the official code), within ``[1, N]``."""
    return min(num_tokens, max(1, round(num_tokens * (1 - r_inner))))


def sequential_merge(hidden: torch.Tensor, kept: torch.Tensor, merged: torch.Tensor) -> torch.Tensor:
    """HoliTom's inner merge, in closed form.

    Each row of ``merged`` (in the given order) joins the row of ``kept`` with the highest cosine
    similarity (ties to the earlier one in ``kept``), and the official loop
    ``h[t] = (h[t] + h[j]) / 2`` is applied in that order.

    Args:
        hidden: ``[N, C]`` hidden states (any float dtype; computed in float32).
        kept: LongTensor ``[K]`` rows that stay.
        merged: LongTensor ``[M]`` rows merged into them, in merge order.
    Returns:
        float32 ``[K, C]``: the kept rows after every merge.
    """
    x = hidden.float()
    anchors = x.index_select(0, kept)
    if merged.numel() == 0:
        return anchors
    others = x.index_select(0, merged)
    unit = torch.nn.functional.normalize
    similarity = unit(others, dim=-1) @ unit(anchors, dim=-1).T  # [M, K], fixed before the loop
    target = similarity.argmax(dim=1)  # first maximum: ties to the earlier kept row
    received = torch.bincount(target, minlength=kept.numel())  # m_t
    # Rank (1-based) of each merged row among those joining the same kept row, in merge order.
    order = torch.sort(target, stable=True).indices
    starts = torch.cumsum(received, 0) - received
    rank = torch.empty_like(target)
    rank[order] = torch.arange(order.numel(), device=target.device) - starts[target[order]] + 1
    # h_t ends as 2^-m h_t + sum_k 2^-(m - k + 1) h_jk (each later update halves all before it).
    weight = torch.exp2(-(received[target] - rank + 1).to(torch.float32))
    total = anchors * torch.exp2(-received.to(torch.float32))[:, None]
    return total.index_add(0, target, others * weight[:, None])


def inner_choose(inputs: StageInputs, r_inner: float) -> StageChoice:
    """HoliTom's inner step on one row: keep the top ``round(N (1 - r_inner))`` video tokens by the
    last token's attention and merge the others into them (:func:`sequential_merge`)."""
    count = inputs.visual.numel()
    keep_count = inner_keep_count(count, r_inner)
    if keep_count >= count:
        return StageChoice(keep=torch.arange(count, device=inputs.visual.device))
    kept = top_indices(last_token_scores(inputs), keep_count)  # ascending: sequence order
    rest = torch.ones(count, dtype=torch.bool, device=kept.device)
    rest[kept] = False
    merged = rest.nonzero().squeeze(1)  # ascending: the official merge order
    tokens = sequential_merge(inputs.hidden.index_select(0, inputs.visual), kept, merged)
    logger.debug("holitom_llm: layer %d keeps %d of %d video tokens", inputs.layer, keep_count, count)
    return StageChoice(keep=kept, tokens=tokens)


def official_merge(hidden: torch.Tensor, top: torch.Tensor, merged: torch.Tensor) -> torch.Tensor:
    """The release's inner merge, in ``hidden``'s dtype (``variant="official"``).

    Similarities ``bmm(h_j, h_t^T) / (|h_j| |h_t|)`` in the input dtype (no eps), columns in the
    order of ``top`` (the release's ``topk`` order), each merged row to ``torch.max``'s index; then
    ``h_t <- (h_t + h_j) / 2`` for the merged rows in the given order, rounding at every step. The
    loop is run by rank (the m-th merge into every kept row at once), which rounds exactly as it.

    Args:
        hidden: ``[N, C]`` the video tokens' hidden states entering layer ``K``.
        top: LongTensor ``[K]`` rows that stay, in ``topk`` order.
        merged: LongTensor ``[M]`` rows merged into them, ascending (the release's loop order).
    Returns:
        ``[K, C]`` in ``hidden``'s dtype: the rows of ``top`` (same order) after every merge.
    """
    states = hidden.clone()
    if merged.numel() == 0:
        return states.index_select(0, top)
    others = states.index_select(0, merged)[None]  # [1, M, C]
    anchors = states.index_select(0, top)[None]  # [1, K, C]
    dot = torch.bmm(others, anchors.transpose(1, 2))
    similarity = dot / (torch.norm(others, dim=-1, keepdim=True) * torch.norm(anchors, dim=-1, keepdim=True).transpose(1, 2))
    target = torch.max(similarity, dim=-1).indices[0]  # [M] into ``top``
    order = torch.sort(target, stable=True).indices
    received = torch.bincount(target, minlength=top.numel())
    starts = torch.cumsum(received, 0) - received
    rank = torch.empty_like(target)
    rank[order] = torch.arange(order.numel(), device=target.device) - starts[target[order]]
    for step in range(int(received.max())):  # loop over merge rounds, not tokens
        now = rank == step
        rows, sources = top[target[now]], merged[now]
        states[rows] = (states[rows] + states[sources]) / 2
    return states.index_select(0, top)


def official_inner_choose(inputs: StageInputs, r_inner: float) -> StageChoice:
    """The release's inner step on one row (``variant="official"``): scores = the head mean, in the
    model dtype, of the last token's attention cast to it (eager's ``softmax(float32).to(dtype)``);
    ``topk(round(N (1 - r_inner)))``; :func:`official_merge`."""
    count = inputs.visual.numel()
    keep_count = inner_keep_count(count, r_inner)
    if keep_count >= count:
        return StageChoice(keep=torch.arange(count, device=inputs.visual.device))
    probabilities = inputs.attention.to(inputs.hidden.dtype)  # [H, R, S]
    scores = torch.mean(probabilities, dim=0)[-1].index_select(0, inputs.visual)
    top = scores.topk(keep_count).indices  # the release's order: by score, its tie order
    rest = torch.ones(count, dtype=torch.bool, device=top.device)
    rest[top] = False
    merged = rest.nonzero().squeeze(1)
    tokens = official_merge(inputs.hidden.index_select(0, inputs.visual), top, merged)
    order = torch.sort(top).indices  # hand the kept rows back in sequence order
    logger.debug("holitom_llm[official]: layer %d keeps %d of %d video tokens", inputs.layer, keep_count, count)
    return StageChoice(keep=top[order], tokens=tokens[order])


def outer_ratio(ratio: float, budget: str, layer: int, num_layers: int, r_inner: float) -> float:
    """The ratio of the outer (pre-LLM) step for the retention ratio ``ratio`` under ``budget``."""
    if budget == "pre_llm":
        return ratio
    if budget == "after_drop":
        outer = ratio / (1 - r_inner)
    else:
        outer = ratio * num_layers / (layer + (num_layers - layer) * (1 - r_inner))
    if outer > 1 + 1e-12:
        raise ValueError(f"budget={budget!r} cannot reach ratio {ratio} with r_inner {r_inner} at layer {layer} of "
                         f"{num_layers}: the outer step would need ratio {outer:.4f} > 1")
    return min(outer, 1.0)


@register_llm_method("holitom_llm", inputs=("vision_attention",), variants=HOLITOM_LLM_VARIANTS)
def holitom_llm_plan(ratio: float, llm: LLMInfo, *, layer: Optional[int] = None, r_inner: float = 0.5,
                     budget: str = "pre_llm", scores: str = "rows", tau: Optional[float] = None,
                     beta: float = 0.6, dominant_fraction: float = 0.0, dpc_k: int = 7,
                     max_window: int = 1024, variant: str = PAPER, seed: int = 0) -> LLMPlan:
    """HoliTom's outer merge (``holitom``) before the LLM, its inner merge before ``layer``; see
    the module docstring.

    Args:
        ratio: retention ratio, read as ``budget`` says.
        layer: ``K`` in ``[1, L - 1]`` (the official ``HOLITOM_k``); None: 18 of 28, scaled.
        r_inner: share of the video tokens merged away at ``K``, in [0, 1) (``HOLITOM_r``).
        budget: ``"pre_llm"``, ``"after_drop"`` or ``"layer_average"``.
        scores: ``"rows"`` or ``"eager"``.
        tau, beta, dominant_fraction, dpc_k, max_window: the outer step's (``holitom``).
        variant: ``"paper"`` or ``"official"`` (both steps as released; module docstring).
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
