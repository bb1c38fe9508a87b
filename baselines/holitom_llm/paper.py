"""HoliTom in-LLM, ``variant="paper"``: the inner step, merged in float32 in closed form.

Inner step, one stage at layer ``K`` (the official ``HOLITOM_k``): after layer ``K - 1`` has run,

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

import torch

from baselines.common.dpc_knn import top_indices
from baselines.common.llm_scores import last_token_scores
from baselines.holitom_llm.budget import inner_keep_count
from vcast.models.llm_plan import StageChoice, StageInputs

logger = logging.getLogger(__name__)


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
