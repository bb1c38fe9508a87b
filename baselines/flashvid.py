"""FlashVID: attention/diversity token selection plus tree-based spatio-temporal merging before
the LLM, then one FastV-style drop inside it.

Paper: "FlashVID: Efficient Video Large Language Models via Training-free Tree-based
Spatiotemporal Token Merging" (Fan et al., ICLR 2026). Official code: Fanziyang-v/FlashVID@1d37422
(the mirror's HEAD is that commit; reference_methods.md section 8: ``flashvid/utils.py`` L23-349
and ``token_selection.py`` for the vision side, ``fastv_prune`` L352-406 for the in-LLM step).

Two registered names, each with ``variant="paper"`` (default) and ``variant="official"``:

* ``flashvid_merge`` (an ordinary compressor, model input ``vision_attention``): the vision side.
* ``flashvid`` (an in-LLM planner): ``flashvid_merge`` (same variant) before the LLM, then one drop
  before layer ``K`` keeping the ``ceil(N * llm_retention)`` video tokens most attended by the
  last prompt token at layer ``K - 1`` (the tokens keep their original positions; the KV cache of
  layers ``< K`` keeps everything; decode steps do not prune).

``variant="official"``: the release bit for bit, in the input dtype where it computes in it
(:mod:`baselines.flashvid_official`, whose header lists every step, dtype and quirk): the tree
merge keeps the release's count (a root holds ``sum / (1 + direct children)``, e.g. 1.5 times the
mean for a 3-frame chain), single-frame segments cluster all ``P`` tokens, ``attn_div_v2`` does
not mask picked tokens, float budgets (``ceil`` of float products), DPC-kNN noise
``torch.rand * 1e-6`` drawn from ``torch.Generator().manual_seed(seed)`` (``seed = 0``). Output
tokens in ``frames``' dtype. Measured against the release loaded at run time on CPU, one thread
(a comparison outside the project, docs/fidelity.md; random, common-offset,
nearly static, piecewise-static and quantised/duplicated-token videos, T = 1..32, P = 2..196,
D = 4..64, r = 0.05..0.6, both selections, min_segment_num 4 / 8, plus 20 edge settings x 5
videos: T = 1, P = 1 / 2, the float-artefact ratio 0.28 at P = 100, r = 0.8 / 0.9, alpha 0 / 0.3
/ 1, thresholds -1 / 0 / 1, min_segment_num > T): kept indices and tokens bitwise equal in
fp32 200/200 + 100/100 edge, bf16 200/200 + 100/100 edge (19 edge cases per dtype raise in both: a
ValueError here), and 8/8 per dtype at full size (T = 32, P = 196; T = 16, P = 247). The one thing
:class:`vcast.Selection` cannot hold: the release can put two outputs at one index (a single-frame
segment's cluster centre on an ADTS token, which happens in nearly every single-frame segment;
``attn_div_v2`` picking a token twice). Here the last in the release's order is kept (the value its
Qwen3-VL code writes into that slot); the release's sequence holds one more token there (the slot
twice on Qwen3-VL, the other token beside it on LLaVA). The comparison applies the same rule to the
release's output; about 40% of those random cases had at least one such index.

``variant="paper"``, vision side on ``frames`` [T, P, D] (every score in float32), ratio ``r`` =
FlashVID's ``retention_ratio``:

1. Budget per frame ``b = ceil(P * r * expansion)`` (capped at P), of which ``A = ceil(b * alpha)``
   are ADTS tokens and ``S = b - A`` are spatio-temporal (STTM) tokens.
2. Segmentation: frame features = token means, L2-normalised; ``s_t = <f_t, f_t+1>``; a cut after
   frame t where ``s_t < segment_threshold``; with fewer than ``min_segment_num`` segments the
   lowest ``s_t`` among the remaining transitions become extra cuts.
3. ADTS per frame: ``D_ij = 1 - cos(x_i, x_j)`` scaled column-wise by ``w_j`` (``"attn_div"``: the
   vision attention ``a_j``; ``"attn_div_v2"``: ``a_j * rel_j`` with ``rel_j`` = mean over the
   segment's frames c of the raw dot product ``<x_j, mean token of frame c>``). Greedy max-min:
   the first pick maximises the column's second-smallest entry (nearest-neighbour distance),
   then each pick maximises ``min_{i in picked} D_ij`` over the unpicked tokens.
4. TSTM per segment of ``L > 1`` frames, over the non-ADTS tokens: each token of frame t >= 1
   points to its most cosine-similar non-ADTS token of frame t - 1 and merges into it iff that
   cosine > ``temporal_threshold``. Lower bound: if fewer than ``b * L`` tokens (ADTS and all of
   frame 0 included) would stay, only the tokens whose similarity exceeds the
   ``(L * P - b * L)``-th largest similarity (but at least ``-1 + 1e-6``) merge. Trees are
   accumulated from the last frame to the first; a root's token is the **true mean** of its tree
   (the paper's temporal average; not the release's ``sum / (1 + direct children)``) and it keeps
   its own position (the earliest frame of the tree).
5. Spatial DPC-kNN per segment: with ``N`` roots and ``S * L`` STTM tokens, if ``N > S * L``
   each frame with ``n_t`` roots keeps ``c_t = ceil(n_t * S * L / N)`` DPC-kNN clusters of its
   roots (``k = min(c_t, 7)``; every root joins the nearest centre, Euclidean); the token is the
   plain mean of the cluster and takes the centre's position. Otherwise every root stays.
6. Output sorted by position; ADTS tokens are the input tokens, the others merged ([K, D] float32).

Kept count (``paper``; the official definition, not ``floor(r T P)``): per segment ``A * L`` ADTS
tokens plus ``sum_t c_t`` (or ``N`` when ``N <= S * L``; 0 when ``S = 0``). The lower bound leaves
``N >= S * L`` roots, so a segment of ``L`` frames keeps between ``b * L`` and ``b * L + L - 1``
(the ceil surplus of ``sum_t c_t``) and a single-frame segment exactly ``b``:
``T * b <= K <= T * b + T - #segments``, and ``K = T * b`` when every frame is its own segment
(e.g. T = 1, or T <= min_segment_num). (``official``: single-frame segments keep ``A`` plus
``ceil(P * (S / P))`` cluster tokens, before index collisions are removed.)

Defaults (official config and scripts, both variants): ``alpha = 0.7``, ``expansion = 1.25``,
``segment_threshold = 0.9``, ``temporal_threshold = 0.8``; the compressor's own defaults are the
wrapper's (``min_segment_num = 8``, ``selection = "attn_div_v2"``, the LLaVA scripts). The planner
picks per family when a value is None: LLaVA-OneVision (and LLaVA-Video) ``K = 20`` of 28 layers,
``llm_retention = 0.3``, ``min_segment_num = 8``, ``attn_div_v2`` (``scripts/llava_ov.sh``,
``llava_vid.sh``); Qwen3-VL ``K = 28`` of 36, ``llm_retention = 0.1``, ``min_segment_num = 4``,
``attn_div`` (v1; ``scripts/qwen3_vl.sh``). Other depths scale ``K`` with
:func:`vcast.models.llm_plan.layer_scaled` (tiny models: 1 of 2 layers, 2 of 3). The defaults do
not depend on ``r`` (the scripts have no per-ratio table).

In-LLM step per variant: ``paper`` keeps ``ceil(N * llm_retention)`` on the exact decimal value,
ranks float32 scores, ties to the lower index. ``official`` keeps the release's
``math.ceil(N * llm_retention)`` (Python float product: ``100 * 0.07 -> 8``) by
``topk(count).indices.sort()`` (its tie order) of the head mean **in the model's dtype** of the
release's manual row (``LLMPlan.score_dtype = "model"``: ``q k^T`` scaled in the model's dtype,
float32 softmax rounded to that dtype; ``score_scale`` ``"multiply"`` by ``scaling`` on LLaVA,
``modeling_qwen2.py`` L202-207, ``"divide"`` by ``sqrt(head_dim)`` on Qwen3-VL,
``modeling_qwen3_vl.py`` L582-589). The rows themselves are computed by
:mod:`vcast.models.attention_rows` (not this module): in bf16 the head mean has many exact ties,
so the ``topk`` tie order decides real choices, and a GPU's one-row GEMM can round a logit
differently from the release's kernel. The choice given the same rows: 300/300 fp32 and 300/300
bf16 equal to the release's ``fastv_prune`` (a comparison outside the project, docs/fidelity.md).

Meaning of ``r`` for ``flashvid``: the retention ratio of the official code. The pre-LLM step
keeps about ``r * expansion`` of the video tokens, the drop keeps ``llm_retention`` of those, so
the layer-averaged share is ``(K * 1.25 r + (L - K) * 1.25 r * rho) / L = r`` for the official
(K, L, rho) = (20, 28, 0.3) and (28, 36, 0.1) (the expansion exists for this); on scaled depths it
differs (the engine reports it next to ``r``).

Model input: ``vision_attention`` [T, P] (supplied by the adapters in :mod:`vcast.models`), the
attention each token received in the vision encoder's last layer, averaged over heads and
queries, pooled onto the LLM token grid: the official LLaVA SigLIP column mean, and the official
Qwen3-VL per-temporal-patch softmax averaged over each 2x2 merge unit (the release computes both
in the model's dtype; ``official`` upcasts what it is given, as the release does, so bf16 values
pass through exactly). Scores: ``scores="rows"`` (default) recomputes the last prompt token's
attention row next to SDPA / FlashAttention (the official code also computes that one row under
FA2); ``scores="eager"`` reads it from the eager attention's weights.

Deliberate deviations of ``variant="paper"`` from the official code (``official`` has none but
the index collisions above and the refusals where the release fails):

* tree merge: a root is the true mean of its tree; the release adds each merged token's whole
  accumulated sum into its parent but 1 per direct child to the parent's count, so a root holds
  ``sum / (1 + direct children)`` (1.5x the mean for a 3-frame chain), which changes merged
  values, then cluster centres, in every multi-frame segment with a chain;
* single-frame segments: the official code clusters all P tokens of the frame, ADTS ones
  included, so a cluster centre can take the position of an ADTS token (two outputs at one
  place). Here their roots are the non-ADTS tokens, as in longer segments: the same count
  ``A + S = b``, no shared position;
* ``attn_div_v2`` excludes already picked tokens from later picks (the official v2 does not mask
  them and can pick a token twice, e.g. when ``rel_j < 0``; v1 masks them with -1, here -inf); the
  official ``x 1e6`` attention scale is dropped (it only mattered against that -1);
* counts use the exact decimal values: ``ceil(P * r * expansion)``, ``ceil(b * alpha)``,
  ``ceil(N * llm_retention)`` on the decimal values as written, and ``c_t`` in integers
  (the official float products can add one: ``100 * 0.28 * 1.25 = 35.00000000000001 -> 36``,
  ``100 * 0.07 = 7.000000000000001 -> 8``);
* ``b`` is capped at P (the official code fails for ``P * r * expansion > P``, i.e. r > 0.8, in
  every multi-frame segment);
* extra segmentation cuts are taken among the transitions that are not cuts yet (the official
  top-k can re-pick an existing cut and build an empty segment when ``min_segment_num > T``);
* DPC-kNN without the ``rand * 1e-6`` density noise (:mod:`baselines.common.dpc_knn`: density ties to
  the lower index; the densest token's distance is its own farthest neighbour where the official
  code takes the largest distance of the frame); every other tie goes to the lower index;
* everything is computed in float32 (the official segmentation, tree merge and cluster means run
  in the model dtype, in place; its ADTS and DPC distances upcast) and zero vectors get cosine 0
  instead of NaN; ``temporal_threshold = 1`` merges nothing (the official code skips the step and
  then divides by zero);
* integration (the engine's, both variants, documented here): the official Qwen3-VL code also
  drops every ``<vision_start>``/``<vision_end>`` token, and LLaVA counts the newline tokens among
  the tokens its FastV step ranks (``N`` includes them; frame mode: one per frame); here both
  stay and only video tokens are counted and ranked. Every batch row and every video of a row
  are handled (the official code asserts batch 1, one video).
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import partial

import torch
import torch.nn.functional as F

from baselines.common.dpc_knn import (
    assign_to_centres,
    cluster_means,
    density_peak_centres,
    top_indices,
)
from baselines.common.llm_scores import last_token_scores
from baselines.flashvid_official import (
    flashvid_merge_official,
    official_llm_count,
    official_top,
)
from baselines.common.model_inputs import vision_attention_input
from baselines.common.selection_output import selection_from_positions
from vcast.models.llm_plan import (
    SCORE_MODES,
    LLMInfo,
    LLMPlan,
    LLMStage,
    StageChoice,
    StageInputs,
    layer_scaled,
)
from vcast.registry import register_llm_method, register_method
from vcast.selection import Selection
from vcast.validation import check_choice, check_int, check_positive, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

SELECTIONS = ("attn_div", "attn_div_v2")
VARIANTS = (PAPER, OFFICIAL)
DPC_MAX_K = 7  # official k = min(clusters, 7)


@dataclass(frozen=True)
class FamilyDefaults:
    """The official script values of one model family (``layer`` given for ``reference_layers``)."""

    layer: int
    reference_layers: int
    llm_retention: float
    min_segment_num: int
    selection: str
    score_scale: str  # how the release's manual score row scales q k^T (differs in bf16)


FAMILY_DEFAULTS = {
    # modeling_qwen2.py L202-207: ``q k^T * self.scaling``
    "LLaVA-OneVision": FamilyDefaults(layer=20, reference_layers=28, llm_retention=0.3, min_segment_num=8,
                                      selection="attn_div_v2", score_scale="multiply"),
    # modeling_qwen3_vl.py L582-589: ``q k^T / self.head_dim ** 0.5``
    "Qwen3-VL": FamilyDefaults(layer=28, reference_layers=36, llm_retention=0.1, min_segment_num=4,
                               selection="attn_div", score_scale="divide"),
}


def ceil_share(count: int, share: float) -> int:
    """``ceil(count * share)`` on the decimal value of ``share`` as written (no float artefacts)."""
    return math.ceil(count * Fraction(repr(float(share))))


def frame_budget(tokens_per_frame: int, ratio: float, expansion: float, alpha: float) -> tuple[int, int, int]:
    """``(b, A, S)``: tokens per frame ``b = min(ceil(P r expansion), P)``, ADTS ``A = ceil(b alpha)``
    and STTM ``S = b - A``."""
    exact = Fraction(repr(float(ratio))) * Fraction(repr(float(expansion))) * tokens_per_frame
    budget = min(math.ceil(exact), tokens_per_frame)
    adts = ceil_share(budget, alpha)
    return budget, adts, budget - adts


def _cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``[..., n, D] x [..., m, D] -> [..., n, m]`` cosine similarities (zero vectors give 0)."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).transpose(-1, -2)


def segment_lengths(frame_features: torch.Tensor, threshold: float, min_segment_num: int) -> list[int]:
    """Segment lengths (summing to T) from the frame features ``[T, D]`` (token means).

    A cut after frame t where the cosine of frames t and t + 1 is below ``threshold``; if that
    gives fewer than ``min_segment_num`` segments, the lowest-similarity transitions that are not
    cuts yet are cut too (ties to the earlier transition).
    """
    num_frames = frame_features.shape[0]
    if num_frames == 1:
        return [1]
    normed = F.normalize(frame_features.float(), dim=-1)
    similarity = (normed[:-1] * normed[1:]).sum(-1)  # [T-1]
    cut = similarity < threshold
    missing = min_segment_num - (int(cut.sum()) + 1)
    if missing > 0:
        # Existing cuts go last so that they are never picked twice (official: set to 1.0).
        candidates = similarity.masked_fill(cut, float("inf"))
        extra = torch.sort(candidates, stable=True).indices[: min(missing, int((~cut).sum()))]
        cut[extra] = True
    bounds = [-1, *torch.nonzero(cut).flatten().tolist(), num_frames - 1]
    return [end - start for start, end in itertools.pairwise(bounds)]


def event_relevance(features: torch.Tensor) -> torch.Tensor:
    """``attn_div_v2``'s ``rel`` [L, P] of a segment ``[L, P, D]``: each token's raw dot product with
    the mean token of every frame of the segment, averaged over those frames."""
    features = features.float()
    return (features @ features.mean(1).T).mean(-1)


def adts_select(features: torch.Tensor, weights: torch.Tensor, count: int) -> torch.Tensor:
    """Greedy max-min ADTS picks of each frame: ``features`` [F, P, D], column weights [F, P] ->
    LongTensor [F, count], ascending per frame.

    ``D_ij = (1 - cos(x_i, x_j)) * w_j``; the first pick maximises the second-smallest entry of its
    column, each next pick maximises ``min_{i picked} D_ij`` over the unpicked tokens (ties to
    the lower index).
    """
    num, tokens, _ = features.shape
    picks = torch.zeros(num, count, dtype=torch.long, device=features.device)
    if count == 0:
        return picks
    distance = (1.0 - _cosine_matrix(features.float(), features.float())) * weights[:, None, :].float()
    if tokens >= 2:
        first = torch.topk(distance, 2, dim=1, largest=False).values[:, 1, :]  # nearest-neighbour distance
    else:
        first = distance[:, 0, :]
    rows = torch.arange(num, device=features.device)
    pick = first.argmax(-1)  # argmax returns the first maximum
    picked = torch.zeros(num, tokens, dtype=torch.bool, device=features.device)
    nearest = distance[rows, pick]  # [F, P] min distance to the picked set
    for step in range(count):
        if step:
            pick = nearest.masked_fill(picked, float("-inf")).argmax(-1)
            nearest = torch.minimum(nearest, distance[rows, pick])
        picks[:, step] = pick
        picked[rows, pick] = True
    return torch.sort(picks, dim=1).values


def temporal_trees(features: torch.Tensor, free: torch.Tensor, threshold: float,
                   lower_bound: int) -> tuple[torch.Tensor, torch.Tensor]:
    """TSTM of one segment: ``features`` [L, P, D] float32, ``free`` [L, P] (not ADTS) ->
    ``roots`` [L, P] bool (free tokens not merged into the previous frame) and ``means``
    [L, P, D] (a root's row is the mean of its tree).

    ``lower_bound``: ``b * L``, the fewest tokens (ADTS and frame 0 included) the merge may leave.
    """
    num_frames, tokens, _ = features.shape
    similarity = _cosine_matrix(features[1:], features[:-1])  # [L-1, P (frame t), P (frame t-1)]
    similarity = similarity.masked_fill(~free[1:, :, None], -1.0).masked_fill(~free[:-1, None, :], -1.0)
    best, parent = similarity.max(dim=-1)  # first maximum on ties
    best = torch.cat([best.new_full((1, tokens), -1.0), best])
    parent = torch.cat([parent.new_zeros((1, tokens)), parent])
    merge = best > threshold
    if int((~merge).sum()) < lower_bound:
        excess = num_frames * tokens - lower_bound  # the most tokens that may merge
        if excess > 0:
            soft = torch.sort(best.flatten(), descending=True).values[excess - 1].clamp_min(-1.0 + 1e-6)
            merge = best > soft
        else:
            merge = torch.zeros_like(merge)
    merge &= free
    sums = features.clone()
    counts = torch.ones(num_frames, tokens, device=features.device)
    for t in range(num_frames - 1, 0, -1):  # last to first: a child's sum is complete when it moves up
        moving = merge[t].to(sums.dtype)
        sums[t - 1].index_add_(0, parent[t], sums[t] * moving[:, None])
        counts[t - 1].index_add_(0, parent[t], counts[t] * moving)
    return free & ~merge, sums / counts[..., None]


def _spatial_merge(means: torch.Tensor, roots: torch.Tensor, target: int, first_position: int,
                   tokens_per_frame: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """DPC-kNN of each frame's roots down to ``ceil(n_t * target / N)`` clusters (when the segment
    has ``N > target`` roots). Returns the positions and tokens of the outputs, per frame."""
    counts = roots.sum(1).tolist()
    total = sum(counts)
    positions, tokens = [], []
    for t, count in enumerate(counts):
        if count == 0:
            continue
        index = torch.nonzero(roots[t]).flatten()
        members = means[t].index_select(0, index)
        clusters = -(-count * target // total) if total > target else count  # exact ceil
        if clusters < count:
            centres = density_peak_centres(members, clusters, k=min(clusters, DPC_MAX_K))
            labels = assign_to_centres(members, centres)
            members = cluster_means(members, labels, clusters)
            index = index.index_select(0, centres)
        positions.append(first_position + t * tokens_per_frame + index)
        tokens.append(members)
    return positions, tokens


def check_merge_params(selection: str, alpha: float, expansion: float, segment_threshold: float,
                       min_segment_num: int, temporal_threshold: float) -> None:
    """ValueError naming a bad vision-side parameter."""
    check_choice("selection", selection, SELECTIONS)
    check_range("alpha", alpha, 0.0, 1.0)
    check_positive("expansion", expansion)
    check_range("segment_threshold", segment_threshold, -1.0, 1.0)
    check_int("min_segment_num", min_segment_num, 1)
    check_range("temporal_threshold", temporal_threshold, -1.0, 1.0)


@register_method("flashvid_merge", inputs=("vision_attention",), variants=VARIANTS)
def flashvid_merge_select(frames: torch.Tensor, ratio: float, *, selection: str = "attn_div_v2",
                          alpha: float = 0.7, expansion: float = 1.25, segment_threshold: float = 0.9,
                          min_segment_num: int = 8, temporal_threshold: float = 0.8,
                          vision_attention: torch.Tensor | None = None, variant: str = PAPER,
                          seed: int = 0) -> Selection:
    """FlashVID's vision side on ``frames`` [T, P, D]; see the module docstring.

    ``variant="official"`` runs :func:`baselines.flashvid_official.flashvid_merge_official` (the
    release in ``frames``' dtype; ``seed`` seeds its DPC-kNN noise). ``seed`` is unused by
    ``"paper"`` (no noise).

    Returns:
        Selection with ``tokens`` [K, D] (``paper``: float32; ``official``: ``frames``' dtype; ADTS
        tokens unchanged, tree / cluster merges at their root's / centre's position); K follows the
        official per-frame ceil rule.
    """
    variant = check_variant("flashvid_merge", variant, VARIANTS)
    check_merge_params(selection, alpha, expansion, segment_threshold, min_segment_num, temporal_threshold)
    seed = check_int("seed", seed, 0)
    num_frames, tokens_per_frame, _ = frames.shape
    attention = vision_attention_input("flashvid_merge", vision_attention, num_frames, tokens_per_frame,
                                       frames.device)
    if variant == OFFICIAL:
        return flashvid_merge_official(frames, ratio, attention, selection=selection, alpha=alpha,
                                       expansion=expansion, segment_threshold=segment_threshold,
                                       min_segment_num=min_segment_num, temporal_threshold=temporal_threshold,
                                       seed=seed)
    features = frames.float()
    budget, adts, sttm = frame_budget(tokens_per_frame, ratio, expansion, alpha)
    lengths = segment_lengths(features.mean(1), segment_threshold, min_segment_num)
    starts = [sum(lengths[:i]) for i in range(len(lengths))]

    weights = attention
    if selection == "attn_div_v2":
        weights = torch.cat([attention[s:s + n] * event_relevance(features[s:s + n])
                             for s, n in zip(starts, lengths)])
    picks = adts_select(features, weights, adts)  # [T, A]
    free = torch.ones(num_frames, tokens_per_frame, dtype=torch.bool, device=frames.device)
    free.scatter_(1, picks, False)
    offsets = torch.arange(num_frames, device=frames.device)[:, None] * tokens_per_frame
    positions = [(offsets + picks).flatten()]
    tokens = [features.gather(1, picks[..., None].expand(-1, -1, features.shape[-1])).flatten(0, 1)]

    if sttm > 0:
        for start, length in zip(starts, lengths):
            segment, segment_free = features[start:start + length], free[start:start + length]
            if length > 1:
                roots, means = temporal_trees(segment, segment_free, temporal_threshold, budget * length)
            else:
                roots, means = segment_free, segment  # see the module docstring (single-frame quirk)
            merged_positions, merged_tokens = _spatial_merge(means, roots, sttm * length,
                                                             start * tokens_per_frame, tokens_per_frame)
            positions += merged_positions
            tokens += merged_tokens
    positions, tokens = torch.cat(positions), torch.cat(tokens)
    logger.debug("flashvid_merge: segments %s, per frame b=%d (ADTS %d, STTM %d), kept %d of %d", lengths,
                 budget, adts, sttm, positions.numel(), num_frames * tokens_per_frame)
    return selection_from_positions(positions, num_frames, tokens_per_frame, tokens=tokens)


def keep_top_attention(inputs: StageInputs, retention: float) -> StageChoice:
    """FlashVID's in-LLM step: keep the ``ceil(N * retention)`` video tokens with the highest
    head-mean attention from the last prompt token (ties to the lower index)."""
    count = min(inputs.visual.numel(), ceil_share(inputs.visual.numel(), retention))
    return StageChoice(keep=top_indices(last_token_scores(inputs), count))


def keep_top_attention_official(inputs: StageInputs, retention: float) -> StageChoice:
    """The release's ``fastv_prune`` choice: ``math.ceil(N * retention)`` (float product) by
    ``topk`` of the head-mean last-token row in the attention's dtype, then sorted."""
    count = official_llm_count(inputs.visual.numel(), retention)
    return StageChoice(keep=official_top(last_token_scores(inputs), count))


@register_llm_method("flashvid", inputs=("vision_attention",), variants=VARIANTS)
def flashvid_plan(ratio: float, llm: LLMInfo, *, layer: int | None = None,
                  llm_retention: float | None = None, min_segment_num: int | None = None,
                  selection: str | None = None, alpha: float = 0.7, expansion: float = 1.25,
                  segment_threshold: float = 0.9, temporal_threshold: float = 0.8,
                  scores: str = "rows", variant: str = PAPER, seed: int = 0) -> LLMPlan:
    """``flashvid_merge`` before the LLM, one top-attention drop before ``layer``; None values take
    the official value of ``llm.family`` (see the module docstring). ``variant`` applies to both
    steps; ``seed`` is passed to the pre-LLM step under ``"official"``."""
    variant = check_variant("flashvid", variant, VARIANTS)
    seed = check_int("seed", seed, 0)
    defaults = FAMILY_DEFAULTS.get(llm.family)
    if defaults is None and None in (layer, llm_retention, min_segment_num, selection):
        raise ValueError(f"flashvid has official defaults for {', '.join(FAMILY_DEFAULTS)} only, not for family "
                         f"{llm.family!r}; pass layer, llm_retention, min_segment_num and selection")
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
        stage = LLMStage(layer=layer, queries="last",
                         choose=partial(keep_top_attention, retention=float(llm_retention)))
        return LLMPlan(stages=(stage,), pre_method="flashvid_merge", pre_ratio=ratio, pre_params=pre_params,
                       positions="original", scores=scores)
    stage = LLMStage(layer=layer, queries="last",
                     choose=partial(keep_top_attention_official, retention=float(llm_retention)))
    # The release's manual row: q k^T scaled in the model's dtype, float32 softmax rounded to the
    # model's dtype, head mean in that dtype (score_dtype="model"); LLaVA multiplies by scaling,
    # Qwen3-VL divides by sqrt(head_dim). An unknown family with every value given: "multiply".
    score_scale = defaults.score_scale if defaults is not None else "multiply"
    return LLMPlan(stages=(stage,), pre_method="flashvid_merge", pre_ratio=ratio,
                   pre_params={**pre_params, "variant": OFFICIAL, "seed": seed}, positions="original",
                   scores=scores, score_dtype="model", score_scale=score_scale)
