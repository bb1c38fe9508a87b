"""FrameFusion: similarity merging of video tokens at the LLM input and in its first layers, then
one importance pruning.

Paper: "FrameFusion: Combining Similarity and Importance for Video Token Reduction on Large
Visual Language Models" (Fu et al., ICCV 2025).
Official code followed: thu-nics/FrameFusion@fbec1d2 ``framefusion/main.py`` (``forward``
L44-138, the merge L180-319, ``_compute_pruning_ratio`` L321-343) and its Qwen2 hooks
``framefusion/models/qwen2/modeling_qwen2.py`` L44-68; inllm_methods.md sections 7.1-7.6 and 9.2.

What happens, per video of a batch row (N = T * P video tokens):

1. **Layer-0 input merge** (``pre_method="framefusion_merge"``, ``baselines/framefusion_merge.py``,
   run on the embeddings before the LLM with ``ratio = cost`` and ``threshold = S_th``): the
   similarity merge below with the empty-list cap ``u = 1 - cost``.
2. **A stage at every layer boundary K = 1..L-1** (the residual stream entering layer K). While
   merging is not finished: the same **similarity merge** on the present tokens:

   * ``c_i = cos(h_i, h_prev)``, ``prev`` = the same patch in the previous frame *still present*
     (the first present frame of each patch is never merged), in float32;
   * candidates ``c_i >= S_th``; ``a = |cand| / n`` (n = the video's present tokens);
   * cap ``u = pruning_ratio(sparsity_list, cost, L)``; if ``|cand| >= floor(u n)`` merge only the
     ``floor(u n)`` most similar and set *finish_merging* and *finish_pruning* (the budget is met by
     merging alone); else merge every candidate, append ``a`` to *sparsity_list*, and set
     *finish_merging* when ``a < ratio_lower_bound``;
   * merge rule: along each patch's present frames, a run of consecutive merged tokens collapses
     into the token just before the run (its earliest frame), which becomes the UNWEIGHTED mean of
     the run's k + 1 current hidden states and keeps its own (original) position.

   At the first stage after merging finished (pruning not finished): **prune** by the head-mean
   attention of the last prompt token at layer K - 1 (``queries="last"``, ``score_layer=K-1``,
   the layer just run, as the official code reads it), keeping the top ``round(n (1 - p))``
   (Python's round, as the official) with ``p = pruning_ratio(sparsity_list, cost, L)``; then
   every later stage is a no-op.

   ``pruning_ratio`` (official ``_compute_pruning_ratio``): ``s_j = prod_{i<=j} (1 - a_i)``,
   ``used = sum_j s_j``, keep share ``(L cost - used) / ((L - |list|) s_last)``, ``p = 1 - keep``
   (0 when the share exceeds 1), ``ValueError("The cost is too small")`` when
   ``L cost - used < 0``. ``L`` is the **real** number of decoder layers (the official hard-codes 28).

Budget: ``cost`` is FrameFusion's budget for the **layer-averaged** share of video tokens
(rho_bar = (1/L) sum_l N_l / N). The harness ratio ``r`` *is* that share: ``cost = r`` by default
(``cost=None``); pass ``cost=...`` to override (the official default is 0.3; inllm_methods.md 9.2
recommends cost = 0.25 for a 25% layer-averaged target). The count after the last stage is data
dependent and below ``cost`` whenever pruning runs (e.g. merges 40%, 10%, 5% then pruning give a
final share of about 27% at cost 0.3). The engine reports rho_bar next to ``r``.

Accounting, steps versus layers: officially each merge *call* appends one entry and layer 0 has
two call sites (before its attention and after it), so ``used`` and ``L - |list|`` count steps,
only approximately layers. Here the calls are the pre-LLM merge (entry 1: what layer 0 sees) and
the stage at boundary K (entry K + 1: what layer K sees), so entry j is exactly the share layer
j - 1 processes; pruning at boundary K (after K entries) sets the share of the L - K remaining
layers so that the layer average equals ``cost`` (up to the rounding of counts), and a capped
merge at entry j does the same for layers j - 1 .. L - 1.

Defaults: ``cost = r``; ``similarity_lower_bound`` (S_th) None = the family default of the
official examples: 0.5 for Qwen (Qwen2-VL example; used for Qwen3-VL), 0.6 otherwise (LLaVA-Video
example, and ``apply_framefusion``'s default); ``ratio_lower_bound = 0.1``; ``scores="rows"``
(``"eager"`` reads the row from the eager attention weights; the official recomputes it next to
SDPA, which "rows" does). The same S_th is passed to the pre-LLM merge. No model inputs.
Positions: every kept or merged token keeps its original position (``positions="original"``; the
official slices cos/sin). The pre-LLM merge follows ``attach(positions=...)``: attach LLaVA with
``positions="original"`` to keep the official original positions there too (the harness default
for LLaVA, "compact", re-numbers the survivors of the layer-0 merge). Qwen3-VL always keeps its
MRoPE coordinates. Multiple videos of a row are handled independently (own sparsity list, flags
and budget), as the pre-LLM merge treats each video on its own.

Deliberate deviations from the official code:

* **Where the in-LLM merges act.** The official merges (and prunes) inside a layer, after the
  attention and before the MLP, on ``h + Attn(h)``. The hooks here act at layer boundaries, after
  the MLP: the similarity is computed on the layer's full output, and the MLP of the merging
  (pruning) layer still runs on the unmerged (unpruned) tokens. The KV each layer caches holds the
  same set of tokens as officially (a layer's attention always sees the tokens left by the merge
  before it); a merged token's values differ slightly (here the mean of the tokens' MLP outputs,
  officially the MLP applied to the mean of their post-attention states).
  The official post-attention call in the last layer has no boundary here (it would only change
  that layer's MLP input).
* **The first stage reconstructs the layer-0 merge's outcome** (its sparsity entry and flags),
  since the pre-LLM step cannot pass state to the stages: the video's original token count is
  taken as ``(last present frame + 1) * (tokens of frame 0)`` (frame 0 is never merged), the
  removed count ``N - n0`` gives ``a_0``, and ``removed >= floor((1 - cost) N)`` means the capped
  branch (both flags set). This is exact unless the layer-0 merge removed every token of the
  video's last frame(s); then ``N`` and ``a_0`` are under-estimated.
* **Branch test on integers** (as ``framefusion_merge``): capped iff ``|cand| >= floor(u n)``;
  the official tests ``a < u`` on floats. The merged set is the same; only when
  ``|cand| = floor(u n) < u n`` does the official not set the flags (it keeps merging later).
* **Exhausted budget at run time.** When ``L cost - used < 0`` the official raises
  ``ValueError("The cost is too small")`` inside the forward. ``pruning_ratio`` raises the same
  error, but a stage cannot fail in the middle of generation: it treats the exhausted budget as
  ``p = 1`` (the formula's limit at zero remaining budget), drops every video token of that video,
  sets both flags and logs a warning. This happens in practice only when ``L cost`` is below the
  share layer 0 already saw, i.e. on the 2- and 3-layer test models.
* **Cost of the scores.** The pruning boundary is data dependent, so every stage asks for the last
  token's attention row (one query row, next to SDPA): about 1-2% of a layer's FLOPs (the K
  projection of the row), also paid after the method finished. The official computes it only at
  the pruning call.
* Ties go to the lower index (stable sorts; the official ``topk`` leaves them unspecified).
  Cosines (``a.b / (|a| |b| + eps)``) and means are computed in float32, not in place in the
  model dtype. Batch rows are all handled (the official asserts batch size 1). The LLaVA-Video
  per-row newline "patches" and the LLaVA-OV trailing newline are not video tokens here
  (inllm_methods.md 7.6).

The description and deviations above are those of ``variant="paper"`` (the default, unchanged).

``variant="official"`` (``official_choose``; the pieces in :mod:`baselines.framefusion_official`):
the release's arithmetic, in the model's dtype, at the same call sites as above.

* Bit-equal (CPU, measured against the release's ``FrameFusion`` module loaded at run time,
  a comparison outside the project, docs/fidelity.md): the layer-0 merge (``framefusion_merge``
  ``variant="official"``, part A: fp32 160/160, bf16 160/160); one in-LLM merge step given the
  hidden states and the sparsity list (part B: the kept set, the merged values in the model's
  dtype and the new list / flags, fp32 160/160, bf16 160/160, the capped branch in 62 / 58 of
  them); one pruning step given the attention row (part C: the head mean ``torch.mean(dim=(1, 2))``
  in the row's dtype, ``round`` half to even, ``torch.topk``'s tie order, fp32 160/160, bf16
  160/160). The budget formula is the release's float arithmetic with ``L = num_layers`` (None:
  28, the release's hard-coded value; pass the real depth, e.g. 36 for Qwen3-VL-8B, for a port);
  the branch tests are the release's float ones (``a < u``, ``int(u n)``); the exhausted budget is
  handled as in ``paper`` (the release raises).
* The pruning row: the plan asks for ``score_dtype="model"`` rows (one query row, ``q k^T`` times
  ``1/sqrt(d)`` in the model's dtype, as the release's ``scaled_dot_product_attention`` with
  ``num=1``). Part D (random Qwen2 attention layers, S up to 1200): fp32 120/120 rows bit-equal;
  bf16 119/120 rows bit-equal (1 of 496,144 probabilities differs: the release applies
  ``torch.softmax`` to bf16 logits, the recompute a float32 softmax rounded to bf16, which
  ``vcast/models/attention_rows.py`` owns); the pruned set was equal in 120/120. ``scores="eager"``
  reads HF's eager weights (an ``S x S`` product: in float32 another GEMM shape than the
  release's one row), so keep ``scores="rows"``.
* Not reproducible with layer-boundary hooks: **where the in-LLM steps act.** The release merges
  and prunes between a layer's attention and its MLP; a hook can only re-lay the sequence between
  layers (shrinking it inside a layer would need a replaced decoder-layer forward). For
  *pruning* this changes nothing: the MLP is per token, so pruning after it keeps the same tokens
  with the same values (a scratch run of the release's module at both placements on a random
  28-layer Qwen2 stack, a comparison outside the project, docs/fidelity.md: 40/40 identical kept sets in
  fp32 and bf16, hidden states equal in bf16; fp32 differed by 0.2% relative on average through
  GEMM shapes). For an in-LLM *merge* the similarity is taken on the layer's output instead of
  ``h + Attn(h)``, and the merged token is the mean of the MLP outputs instead of the MLP of the
  mean: on one random Qwen2 layer (``placement_local.py``) the candidate test flips for 2.5% of
  token pairs and a merged value differs by a median 5.6% (cosine 0.6-0.8), 2.2% (0.8-0.95),
  0.5% (>= 0.95) relative. In-LLM merges (after the layer-0 one) are the only steps affected;
  the layer-0 merge runs before any layer, exactly as in the release. The release's call after the
  last layer's attention has no boundary (it would change only that MLP's input).
* **The first stage reconstructs the layer-0 merge's outcome** (the release's state is not
  passed between stages) from the entering tokens and the video's original ``T P``
  (``StageInputs.video_sizes``, from the adapter): ``removed = T P - n0``; a removal of exactly
  ``int(u N) > 0`` tokens (or ``a >= u``) is read as the capped branch, which is wrong only if the
  uncapped merge had exactly ``int(u N)`` candidates (synthetic videos: 326/336 in fp32 and bf16,
  the 10 misses all at P = 1). Without ``video_sizes`` (a hand-built ``StageInputs``)
  ``N = (last present frame + 1) P``, which is too small when whole trailing frames were merged
  away (the same videos: fp32 259/336, bf16 264/336).
* Several videos in one row are handled independently (the release has one sparsity list and
  merges across the videos of its sequence; it asserts batch size 1).
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass, field

from typing import Optional

import torch

from baselines.common.dpc_knn import top_indices
from baselines.common.llm_scores import last_token_scores
from baselines.framefusion_merge import merge_cap
from baselines.framefusion_official import (
    RELEASE_BUDGET_LAYERS,
    adjacent_similarity,
    merge_choice,
    merge_tokens,
    patch_major,
    prune_choice,
    pruning_ratio,
)
from vcast.models.llm_plan import (
    SCORE_MODES,
    LLMInfo,
    LLMPlan,
    LLMStage,
    StageChoice,
    StageInputs,
)
from vcast.registry import register_llm_method
from vcast.temporal import cosine
from vcast.validation import check_choice, check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

PRE_METHOD = "framefusion_merge"
STATE_KEY = "framefusion"  # inputs.state[STATE_KEY][video] -> VideoState
VARIANTS = (PAPER, OFFICIAL)


def default_similarity_bound(family: str) -> float:
    """S_th of the official examples: 0.5 for Qwen (Qwen2-VL), 0.6 otherwise (LLaVA-Video)."""
    return 0.5 if family.lower().startswith("qwen") else 0.6


@dataclass
class VideoState:
    """FrameFusion's per-video state between the stages of one prefill.

    Attributes:
        sparsity_list: share of the then-present tokens each merge step removed.
        finish_merging: no more similarity merges.
        finish_pruning: the pruning step ran (or is not needed).
        original_tokens: the video's token count before the layer-0 merge (as reconstructed).
    """

    sparsity_list: list[float] = field(default_factory=list)
    finish_merging: bool = False
    finish_pruning: bool = False
    original_tokens: int = 0


def entry_state(frames: torch.Tensor, cost: float, ratio_lower_bound: float) -> VideoState:
    """The state after the layer-0 merge, from the frame index of each entering token [n0].

    Frame 0 is never merged, so its token count is P; the original count is taken as
    ``(last present frame + 1) * P`` (exact unless whole trailing frames were merged away).
    """
    per_frame = int((frames == 0).sum())
    total = (int(frames.max()) + 1) * per_frame
    removed = max(0, total - frames.numel())
    if removed >= merge_cap(cost, total):  # framefusion_merge's capped branch: budget met
        return VideoState([], True, True, total)
    first = removed / total
    return VideoState([first], first < ratio_lower_bound, False, total)


def present_similarity(hidden: torch.Tensor, frames: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
    """float32 [n]: cosine of each token to the same patch's previous present frame, ``-inf`` for
    the first present frame of each patch. ``hidden`` [n, C]; ``frames``, ``patches`` [n]."""
    count = frames.numel()
    sims = torch.full((count,), float("-inf"), dtype=torch.float32, device=hidden.device)
    if count < 2:
        return sims
    order = _patch_major(frames, patches)
    same = patches[order[1:]] == patches[order[:-1]]
    x = hidden.float()
    ordered = torch.full_like(sims, float("-inf"))
    ordered[1:] = torch.where(same, cosine(x[order[1:]], x[order[:-1]]), ordered[1:])
    sims[order] = ordered
    return sims


def _patch_major(frames: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
    """Order of the tokens by (patch, frame): LongTensor [n]."""
    key = patches.long() * (int(frames.max()) + 1) + frames.long()
    return torch.sort(key, stable=True).indices


def merge_runs(hidden: torch.Tensor, frames: torch.Tensor, patches: torch.Tensor, merged: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Collapse each run of merged tokens into the token before it (unweighted mean).

    Args:
        hidden: [n, C] the video's present tokens.
        frames, patches: [n] their frame and on-grid index.
        merged: BoolTensor [n]; never the first present frame of a patch.
    Returns:
        ``kept`` [n'] indices of the surviving tokens (ascending), ``grown`` [g] those that absorbed
        a run (ascending) and ``means`` [g, C] float32 their new hidden states.
    """
    count = frames.numel()
    device = hidden.device
    order = _patch_major(frames, patches)
    place = torch.arange(count, device=device)
    # The latest unmerged token at or before each one in (patch, frame) order; each patch's first
    # token is unmerged, so the running maximum never crosses into the previous patch.
    anchor_place = torch.cummax(torch.where(merged[order], torch.zeros_like(place), place), dim=0).values
    anchor = torch.empty_like(place)
    anchor[order] = order[anchor_place]
    sizes = torch.bincount(anchor, minlength=count)
    kept = torch.nonzero(~merged).squeeze(1)
    grown = torch.nonzero(sizes > 1).squeeze(1)
    # Only the runs are touched: each grown anchor's own state plus its run members.
    slot = torch.full((count,), -1, dtype=torch.long, device=device)
    slot[grown] = torch.arange(grown.numel(), device=device)
    members = torch.nonzero(merged).squeeze(1)
    sums = hidden.index_select(0, grown).float().index_add_(0, slot[anchor[members]],
                                                            hidden.index_select(0, members).float())
    means = sums / sizes[grown, None].to(sums.dtype)
    return kept, grown, means


def _stage_share(inputs: StageInputs, video: int, state: VideoState, cost: float, num_layers: int) -> float | None:
    """This stage's share of ``video`` (the budget formula), or None when its budget is exhausted:
    then the video is finished and its tokens dropped (both variants; the release raises)."""
    try:
        return pruning_ratio(state.sparsity_list, cost, num_layers)
    except ValueError as error:
        logger.warning("framefusion: at layer %d video %d has exhausted its budget (%s); its video tokens are all "
                       "dropped (the official raises here)", inputs.layer, video, error)
        state.finish_merging = state.finish_pruning = True
        return None


def framefusion_choose(inputs: StageInputs, *, cost: float, threshold: float, ratio_lower_bound: float,
                       budget_layers: int | None = None) -> StageChoice:
    """One FrameFusion stage on one batch row (see the module docstring); ``budget_layers`` is the
    budget formula's ``L`` (None: the model's depth)."""
    states: dict[int, VideoState] = inputs.state.setdefault(STATE_KEY, {})
    num_layers = inputs.num_layers if budget_layers is None else budget_layers
    total = inputs.visual.numel()
    keep_parts: list[torch.Tensor] = []
    updates: list[tuple[torch.Tensor, torch.Tensor]] = []
    changed = False
    scores: torch.Tensor | None = None
    for video in torch.unique(inputs.videos).tolist():
        local = torch.nonzero(inputs.videos == video).squeeze(1)  # indices into visual, ascending
        state = states.get(video)
        if state is None:  # the first stage sees the tokens as the layer-0 merge left them
            state = states[video] = entry_state(inputs.frames[local], cost, ratio_lower_bound)
        if state.finish_merging and state.finish_pruning:
            keep_parts.append(local)
            continue
        count = local.numel()
        share = _stage_share(inputs, video, state, cost, num_layers)
        if share is None:
            changed = True
            continue
        if state.finish_merging:  # the pruning step
            if inputs.attention is None:
                raise ValueError("framefusion: the pruning stage needs the last token's attention row "
                                 "(queries='last')")
            if scores is None:
                scores = last_token_scores(inputs)
            kept = top_indices(scores[local], round(count * (1.0 - share)))
            keep_parts.append(local[kept])
            state.finish_pruning = True
            changed = changed or kept.numel() != count
            logger.debug("framefusion: layer %d video %d pruned %d -> %d (p=%.4f)", inputs.layer, video, count,
                         kept.numel(), share)
            continue
        # The similarity merge.
        frames, patches = inputs.frames[local], inputs.patches[local]
        hidden = inputs.hidden.index_select(0, inputs.visual[local])
        sims = present_similarity(hidden, frames, patches)
        candidate = sims >= threshold
        num_candidates = int(candidate.sum())
        cap = math.floor(share * count)
        if num_candidates >= cap:  # the budget is met by merging: no pruning afterwards
            merged = torch.zeros_like(candidate)
            merged[torch.sort(sims, descending=True, stable=True).indices[:cap]] = True
            state.finish_merging = state.finish_pruning = True
        else:
            merged = candidate
            step = num_candidates / count
            state.sparsity_list.append(step)
            state.finish_merging = step < ratio_lower_bound
        logger.debug("framefusion: layer %d video %d merges %d of %d (candidates %d, cap %d)", inputs.layer, video,
                     int(merged.sum()), count, num_candidates, cap)
        if not bool(merged.any()):
            keep_parts.append(local)
            continue
        kept, grown, means = merge_runs(hidden, frames, patches, merged)
        keep_parts.append(local[kept])
        updates.append((local[grown], means))
        changed = True
    if not changed:
        return StageChoice(keep=torch.arange(total, device=inputs.visual.device))
    keep = (torch.cat(keep_parts) if keep_parts
            else torch.zeros(0, dtype=torch.long, device=inputs.visual.device))
    if not updates:
        return StageChoice(keep=keep)
    tokens = inputs.hidden.index_select(0, inputs.visual[keep]).float()
    row_of = torch.full((total,), -1, dtype=torch.long, device=keep.device)
    row_of[keep] = torch.arange(keep.numel(), device=keep.device)
    for indices, means in updates:
        tokens[row_of[indices]] = means
    return StageChoice(keep=keep, tokens=tokens)


def official_entry_state(frames: torch.Tensor, cost: float, ratio_lower_bound: float, num_layers: int,
                         original: Optional[int] = None) -> VideoState:
    """The release's state after its layer-0 merge, from the frame index of each entering token [n0].

    The stages do not see the release's state, so it is read off the counts: ``N`` = the video's
    ``T * P`` before the merge (``original``, from ``StageInputs.video_sizes``; without it,
    ``(last present frame + 1) * P`` as in :func:`entry_state`, ``P`` = the tokens of frame 0,
    never merged), ``removed = N - n0``. The release took the capped branch iff
    ``|cand| / N >= u`` (floats) and then removed ``int(u N)``; an uncapped merge removes
    ``|cand|`` with ``|cand| / N < u``. A removal of exactly ``int(u N) > 0`` is read as capped
    (it was uncapped only if exactly that many tokens were candidates). Wrong when whole trailing
    frames were merged away (``N`` too small), see the module docstring.
    """
    total = original if original is not None else (int(frames.max()) + 1) * int((frames == 0).sum())
    removed = max(0, total - frames.numel())
    cap_share = pruning_ratio([], cost, num_layers)
    share = removed / total
    if share >= cap_share or (removed > 0 and removed == int(cap_share * total)):
        return VideoState([], True, True, total)
    return VideoState([share], share < ratio_lower_bound, False, total)


def official_choose(inputs: StageInputs, *, cost: float, threshold: float, ratio_lower_bound: float,
                    budget_layers: int) -> StageChoice:
    """One stage of the release (``variant="official"``) on one batch row: its merge step or its
    prune step in the model's dtype (:mod:`baselines.framefusion_official`)."""
    states: dict[int, VideoState] = inputs.state.setdefault(STATE_KEY, {})
    total = inputs.visual.numel()
    keep_parts: list[torch.Tensor] = []
    token_parts: list[torch.Tensor] = []
    changed = False
    for video in torch.unique(inputs.videos).tolist():
        local = torch.nonzero(inputs.videos == video).squeeze(1)  # indices into visual, ascending
        hidden = inputs.hidden.index_select(0, inputs.visual[local])  # [n, C], the model's dtype
        state = states.get(video)
        if state is None:
            state = states[video] = official_entry_state(inputs.frames[local], cost, ratio_lower_bound,
                                                         budget_layers, inputs.video_sizes.get(video))
        if state.finish_merging and state.finish_pruning:
            keep_parts.append(local)
            token_parts.append(hidden)
            continue
        count = local.numel()
        share = _stage_share(inputs, video, state, cost, budget_layers)
        if share is None:
            changed = True
            continue
        if state.finish_merging:  # the release's pruning branch
            if inputs.attention is None:
                raise ValueError("framefusion: the pruning stage needs the last token's attention row "
                                 "(queries='last')")
            kept = prune_choice(inputs.attention, inputs.visual[local], share)
            keep_parts.append(local[kept])
            token_parts.append(hidden[kept])
            state.finish_pruning = True
            changed = changed or kept.numel() != count
            continue
        order = patch_major(inputs.frames[local], inputs.patches[local])
        ordered = hidden[order]
        choice = merge_choice(adjacent_similarity(ordered, inputs.patches[local][order]), threshold, share)
        if choice.capped:
            state.finish_merging = state.finish_pruning = True
        else:
            state.sparsity_list.append(choice.share)
            state.finish_merging = choice.share < ratio_lower_bound
        logger.debug("framefusion[official]: layer %d video %d merges %d of %d (capped %s)", inputs.layer, video,
                     int(choice.merged.sum()), count, choice.capped)
        survivors = ~choice.merged
        keep_parts.append(local[order[survivors]])
        token_parts.append(merge_tokens(ordered, choice.merged)[survivors])
        changed = changed or bool(choice.merged.any())
    if not changed:
        return StageChoice(keep=torch.arange(total, device=inputs.visual.device))
    if not keep_parts:
        return StageChoice(keep=torch.zeros(0, dtype=torch.long, device=inputs.visual.device))
    return StageChoice(keep=torch.cat(keep_parts), tokens=torch.cat(token_parts))


@register_llm_method("framefusion", variants=VARIANTS)
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
            the module docstring for what the layer-boundary hooks cannot reproduce).
    """
    variant = check_variant("framefusion", variant, VARIANTS)
    cost = check_range("cost", ratio if cost is None else cost, 0.0, 1.0)
    if cost <= 0:
        raise ValueError(f"cost must be in (0, 1], got {cost!r}")
    threshold = (default_similarity_bound(llm.family) if similarity_lower_bound is None
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
