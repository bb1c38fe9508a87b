"""SparseVLM (v1.5): prune video tokens inside the LLM by the attention of text "raters", recycling
the best pruned ones as cluster means.

Paper: "SparseVLM: Visual Token Sparsification for Efficient Vision-Language Model Inference"
(Zhang et al., ICML 2025).
Official code followed: Gumpest/SparseVLMs@26a5f48 (main, v1.5: ``llava/model/language_model/
modelling_sparse_llama.py`` L198-322, ``score.py``, ``utils.py`` ``cluster_and_merge``), as described
in inllm_methods.md section 5 (and 2, 9.2):

1. **Raters**, once per prompt, from the layer-0 input embeddings ``E`` (``StageInputs.embeddings``):
   ``M = E_vis E_text^T`` [N0, T] (text = every token after the video), softmax over the text axis,
   mean over the video tokens -> ``r`` [T]; the raters are ``{t : r_t > mean(r)}``. They are chosen at
   the first stage and kept in ``StageInputs.state`` for the later ones (text is never pruned, so
   they stay the same tokens: the last ``T`` rows of ``StageInputs.rows``).
2. At SparseVLM layer ``l``: ``score_j`` = mean over raters of the head-mean softmax attention of
   layer ``l`` from the rater to video token ``j``; the top ``k_l = min(count_l, v - 1)`` stay
   (``v`` the video tokens present, recycled ones included).
3. **Recycling**: of the ``n`` pruned tokens the top ``m = floor(0.3 n) + 1`` by score are clustered
   on their **layer-output** hidden states with DPC-kNN (``c = floor(m / 10) + 1`` clusters, ``c``
   neighbours, distances ``|x_i - x_j| / sqrt(C)``; :mod:`baselines.common.dpc_knn`) and each cluster is
   replaced by its unweighted mean. After the stage ``v = k_l + c``.

The official code prunes AFTER layer ``l`` runs on all tokens (its KV cache is complete), reading
that layer's attention: a SparseVLM "layer ``l``" is our stage at layer ``K = l + 1`` with
``score_layer = K - 1`` and ``queries="text"`` (every token after the row's last video token;
the raters are a subset of those rows). Positions are re-numbered ``0..S'-1`` after each stage
(``positions="compact"``, the official prefix slice of the position ids); decoding continues each
layer's own count. Qwen3-VL keeps its original MRoPE coordinates (the engine,
:mod:`vcast.models.layer_drops`, does this by itself). No pre-LLM step, no model inputs.

Scores: ``scores="rows"`` (default) recomputes only the needed attention rows next to SDPA /
FlashAttention; ``scores="eager"`` reads them from the eager attention's weights, as the official
code does (it materialises ``softmax(QK^T)`` at every layer; needs ``attn_implementation="eager"``).

Retention ratio ``r`` and schedule: the official v1.5 lists are absolute counts for 576 LLaVA
tokens; the "128" list ``[303, 110, 36]`` at layers ``[2, 6, 15]`` of 32 is its ~25% layer-averaged
setting (inllm_methods.md section 5.3). Default (section 9.2): keep the fractions
``[303, 110, 36] / 576 = [52.6%, 19.1%, 6.25%]`` of the entry count ``N0`` at SparseVLM layers
``[2, 5, 13]`` of a 28-layer LLM (our stages ``[3, 6, 14]``), i.e. ``rho ~ 25.6%`` with recycling.
For a ratio ``r`` the fractions are scaled by ``r / 0.25`` (an explicit, linear rule; not
official): ``count_l = int(fraction_l * (r / 0.25) * N0)`` (floored, at least 1). The engine reports
the achieved layer-averaged retention next to ``r``. Counts on N0 = 576 at ``r = 0.25``:
303 + 9 recycled = 312, 110 + 7 = 117, 36 + 3 = 39 (the official ones). An explicit ``fractions``
list is used as given (``r`` does not scale it).

Depth: the stage layers ``K = l + 1`` (= the number of layers that see the larger set) are moved
to ``L`` layers with :func:`vcast.models.llm_plan.layer_scaled` (``round(K * L / 28)`` within
``[1, L - 1]``): 36 layers -> stages ``[4, 8, 18]``; 32 -> ``[3, 7, 16]``; the tiny test models get
``[1]`` (2 layers) and ``[1, 2]`` (3 layers). Scheduled drops that land on one layer merge into
one stage with the LAST (smallest) count among them. An explicit ``layers`` list (SparseVLM
convention ``l``, strictly increasing in ``[0, L - 2]``) is used as given.

Variants (``variant=``; both take every parameter above; ``counts=[k_1, ...]`` gives absolute
per-stage counts instead of the scaled shares, e.g. the release's lists ``[300, 200, 110]``,
``[303, 110, 36]``, ``[238, 48, 26]``, ``[66, 30, 17]`` for its RETAIN 192 / 128 / 96 / 64):

``"paper"`` (default): everything described above and below, float32 scores and means (bf16 and
float32 models choose alike).

``"official"``: Gumpest/SparseVLMs@26a5f48 (``main``, the HEAD of the mirror; v1.5: ``score.py``'s
default ``USE_VERSION=1_0`` selects the v1.5 lists), bit for bit on CPU in its arithmetic, in the
model's dtype (:mod:`baselines.sparsevlm_official`): raters from a bf16 ``E_vis E_text^T`` /
softmax / mean; head and rater means of the attention in the model's dtype
(``LLMPlan.score_dtype="model"``); ``topk(min(count, v - 1))``; ``int(0.3 n) + 1`` recycled in
``topk`` order, ``int(m / 10) + 1`` clusters, the release's ``cluster_and_merge`` (broadcast
distances, ``c`` neighbours, density noise ``U(0, 1) * 1e-6`` from
``torch.Generator().manual_seed(seed)``, ``seed=0``, drawn per stage in the release's order, the
weights ``1 / (count + 1e-6)`` and their ``index_add_`` in the model's dtype); the recycled means
placed AFTER the kept video tokens, as the release does: the deviation "recycled tokens sit at
their centre's slot" of ``paper`` is **reproduced away** (the surviving slots are chosen so that
the compacted sequence is the release's ``[kept in order, means in cluster order, text]``).
Measured against the release's own lines exec'd at run time (its rater lines L200-204, its stage
lines L259-299 with ``attn_postprocess_topk`` and ``cluster_and_merge``), on hand-made layer
outputs, embeddings and attention (entries 20-576, later stages with fewer tokens, 1-40 text
tokens, tied and flat attention, duplicated tokens, RETAIN 192/128/96/64 at layers 2/6/15): the
sequence after the stage, bit for bit, fp32 150/150 and bf16 150/150 (a comparison outside the
project, docs/fidelity.md). Not bit-equal: the attention itself is the engine's
(:mod:`vcast.models.attention_rows`, ``score_dtype="model"``: a float32 softmax rounded to bf16,
HF's eager form), while the release's SDPA replacement calls ``torch.softmax`` on the bf16 logits;
on CPU the two differ in the last bit in 42 of 480,000 random attention rows, and the kept sets
of 200 random stages (100 of 200 tokens) did not change (0 tokens). The noise comes from a CPU
generator (the release on a GPU draws from the CUDA generator; in bf16 the ``1e-6`` vanishes
against densities of order 0.1-1 anyway). Defaults are the same as ``paper``'s (layers
``[2, 5, 13]`` of 28 scaled, the "128" shares x ``r / 0.25`` of ``N0``: the release has no video or
28-layer setting; at ``N0 = 576``, ``r = 0.25`` the counts are its ``[303, 110, 36]``).

Deviations of ``variant="paper"`` from the official code:
- the recycled cluster means are written at the slot (and position) of their cluster's centre
  token, among the kept video tokens in their original order; the official code inserts them
  after the kept video tokens, just before the text (so with compacted positions their position
  ids differ; the set of tokens is the same; ``variant="official"`` places them as the release);
- DPC-kNN without the random ``1e-6`` density noise (ties to the lower index,
  :mod:`baselines.common.dpc_knn`); the densest token's distance is its own farthest distance (official:
  the largest distance of the whole set); the clustered tokens are in column order (official: by
  descending score); the 1e-6 in the official mean's denominator is dropped;
- every score in float32 (the official rater product and softmax run in the model dtype);
- batch rows are handled independently (the official code assumes batch 1 and one image); several
  videos of a row are pruned together, and their text is the tokens after the last one (both
  variants);
- edge cases the official code does not meet: no text after the video -> no scores, the earliest
  tokens stay (ties to the lower index; ``official``: all-zero scores, ``topk``'s choice); no token
  above the mean (e.g. one text token) -> every text token is a rater (``official``: none, NaN
  scores, ``topk``'s choice, as the release).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from itertools import pairwise

import torch

from baselines.common.dpc_knn import (
    assign_to_centres,
    cluster_means,
    density_peak_centres,
    top_indices,
)
from baselines.sparsevlm_official import official_choose, rater_rows
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

REFERENCE_LAYERS = 28  # the depth the default schedule is given for (Qwen2-7B)
REFERENCE_SPARSE_LAYERS = (2, 5, 13)  # SparseVLM layers l (prune after l): inllm_methods.md section 9.2
OFFICIAL_COUNTS = (303, 110, 36)  # the v1.5 "128" list, for 576 tokens (score.py)
OFFICIAL_TOKENS = 576
REFERENCE_RATIO = 0.25  # the layer-averaged retention the "128" schedule stands for
RECYCLE_SHARE = 0.3  # top 30% of the pruned tokens are recycled
CLUSTER_SIZE = 10  # one cluster per 10 recycled tokens (+1)
FLOOR_TOLERANCE = 1e-9
STATE_RATERS = "sparsevlm_raters"
STATE_TEXT = "sparsevlm_text_tokens"
VARIANTS = (PAPER, OFFICIAL)


def default_stage_layers(num_layers: int) -> list[int]:
    """Stage layers ``K = l + 1`` of the default schedule moved to ``num_layers`` layers (may repeat)."""
    return [layer_scaled(layer + 1, REFERENCE_LAYERS, num_layers) for layer in REFERENCE_SPARSE_LAYERS]


def select_raters(embeddings: torch.Tensor, entry_visual: torch.Tensor, text_tokens: int) -> torch.Tensor:
    """Rater indices (relative to the text start) from the layer-0 embeddings.

    Args:
        embeddings: ``[S0, C]`` the row's layer-0 input.
        entry_visual: LongTensor ``[N0]`` video columns of ``embeddings``.
        text_tokens: ``T``: the text tokens after the (last) video.
    Returns:
        LongTensor ``[R]`` ascending, in ``[0, T)``: ``t`` with ``r_t > mean(r)``, where ``r`` is the
        visual-mean of the text-axis softmax of ``E_vis E_text^T``; every text token when none is
        above the mean.
    """
    start = int(entry_visual[-1]) + 1
    text = embeddings[start : start + text_tokens].float()
    visual = embeddings.index_select(0, entry_visual).float()
    relevance = (visual @ text.T).softmax(dim=1).mean(dim=0)  # [T]
    raters = (relevance > relevance.mean()).nonzero().squeeze(1)
    if raters.numel() == 0:
        raters = torch.arange(text_tokens, device=embeddings.device)
    return raters


def rater_scores(inputs: StageInputs) -> torch.Tensor | None:
    """float32 ``[N]``: mean over the raters of the head-mean attention to each video token (None
    without text rows). Chooses the raters at the first call of the row's prefill (kept in ``state``)."""
    if inputs.attention is None or inputs.rows.numel() == 0:
        return None
    rows = rater_rows(inputs, select_raters, STATE_RATERS, STATE_TEXT)
    attention = inputs.attention.index_select(1, rows).mean(0)  # head mean: [raters, S]
    return attention.index_select(1, inputs.visual).mean(0)


def recycle(hidden: torch.Tensor, scores: torch.Tensor, pruned: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cluster the best pruned tokens and return ``(centres, means)``.

    Args:
        hidden: ``[N, C]`` the layer-output hidden states of the video tokens present.
        scores: float32 ``[N]`` their rater scores.
        pruned: LongTensor ``[n]`` (``n >= 1``) the pruned ones (indices into the ``N``), ascending.
    Returns:
        ``centres``: LongTensor ``[c]`` indices into the ``N`` where the means go (each cluster's
        DPC-kNN centre), ``means``: float32 ``[c, C]`` unweighted cluster means, for
        ``m = floor(0.3 n) + 1`` recycled tokens and ``c = floor(m / 10) + 1`` clusters.
    """
    recycled_count = math.floor(RECYCLE_SHARE * pruned.numel()) + 1
    recycled = pruned[top_indices(scores.index_select(0, pruned), recycled_count)]  # ascending
    features = hidden.index_select(0, recycled).float()
    clusters = recycled_count // CLUSTER_SIZE + 1
    centres = density_peak_centres(features, clusters, k=clusters)
    labels = assign_to_centres(features, centres)
    return recycled[centres], cluster_means(features, labels, clusters)


def sparsevlm_choose(inputs: StageInputs, count: int, recycling: bool) -> StageChoice:
    """Keep the top ``min(count, v - 1)`` by rater attention, plus the recycled cluster means."""
    present = inputs.visual.numel()
    scores = rater_scores(inputs)
    if scores is None:  # nothing to rate with: all scores tie, the earliest tokens win
        scores = torch.zeros(present, dtype=torch.float32, device=inputs.visual.device)
    keep = top_indices(scores, min(count, present - 1))
    if not recycling:
        return StageChoice(keep=keep)
    pruned_mask = torch.ones(present, dtype=torch.bool, device=scores.device)
    pruned_mask[keep] = False
    pruned = pruned_mask.nonzero().squeeze(1)
    centres, means = recycle(inputs.hidden.index_select(0, inputs.visual), scores, pruned)
    kept_tokens = inputs.hidden.index_select(0, inputs.visual.index_select(0, keep)).float()
    return StageChoice(keep=torch.cat([keep, centres]), tokens=torch.cat([kept_tokens, means]))


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


def stage_counts(fractions: Sequence[float], scale: float, entry_tokens: int) -> list[int]:
    """``int(fraction * scale * N0)`` (at least 1) per stage."""
    return [max(1, math.floor(f * scale * entry_tokens + FLOOR_TOLERANCE)) for f in fractions]


def check_counts(counts: object, stages: int) -> list[int]:
    """One absolute count ``>= 1`` per stage (ValueError naming ``counts``)."""
    if isinstance(counts, (str, bytes)) or not isinstance(counts, Sequence):
        raise ValueError(f"counts must be a list of token counts, got {counts!r}")
    if len(counts) != stages:
        raise ValueError(f"counts must have one count per pruning layer ({stages}), got {len(counts)}")
    return [check_int("counts", count, 1) for count in counts]


@register_llm_method("sparsevlm", variants=VARIANTS)
def sparsevlm_plan(ratio: float, llm: LLMInfo, *, layers: Sequence[int] | None = None,
                   fractions: Sequence[float] | None = None, counts: Sequence[int] | None = None,
                   recycling: bool = True, scores: str = "rows", variant: str = PAPER,
                   seed: int = 0) -> LLMPlan:
    """Prune after each SparseVLM layer ``l`` (our stage ``l + 1``); see the module docstring."""
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
