"""PruneVid, full: the pre-LLM static/dynamic merge (stage A), then attention pruning inside the LLM (stage B).

Paper: "PruneVid: Visual Token Pruning for Efficient Video Large Language Models" (Huang et al.,
ACL 2025 Findings). Official code followed: Visual-AI/PruneVid@b12600c (PLLaVA only), specified in
inllm_methods.md section 6 (stage A: 6.1; stage B: 6.2, ``models/pllava/llama.py`` L1288-1462 and
``models/pllava/elastic_cache.py`` ``VTPWindowCache`` L108-207; defaults: 6.3; porting: 6.4, 9.2).

Stage A is the registered compressor ``prunevid_stage_a`` (``baselines/prunevid_stage_a.py``; its
header lists its own deviations), run before the LLM at ratio ``cluster_ratio`` (the official
``cluster_ratio`` gamma: the share stage A keeps) with ``tau``, ``temporal_segment_ratio``,
``dpc_k`` and ``min_cluster_tokens`` passed through.

Stage B (this file), one stage: after layer ``selected_layer`` (``S_sel``) has run, the attention of
that layer is read for every token after the row's last video token as queries
(``queries="text"``), **before RoPE and without the causal mask** (``rotary=False``,
``causal=False``: softmax of the raw projections over all keys, as the official patched eager
attention returns it); the score of a video token is ``g = max over heads, then max over query
rows``; within every group (below) the top ``floor(n_g * alpha)`` video tokens by ``g`` stay for
layers ``S_sel + 1 .. L - 1`` (the plan's stage sits at ``K = S_sel + 1``), at their original
positions (``positions="original"``: gaps stay, as the official ``position_ids[:, index]``; Qwen3-VL
keeps its original MRoPE coordinates). Ties go to the lower index.

Groups, and what the stage can recover of stage A's structure. The official stage B receives
stage A's ``static_sizes``, ``dynamic_sizes`` and ``window_sizes`` and keeps, per window, the top
``floor(static * alpha)`` static tokens and, per frame, the top ``floor((n_dyn / W) * alpha)``
dynamic tokens. Our stage only sees stage A's *outputs* (``StageInputs.frames`` / ``patches`` of
each present token; ``embeddings`` are the merged tokens, not the original frames, so stage A
cannot be re-run). ``prunevid_stage_a`` places every output in a frame: a dynamic token (or
dynamic cluster) in its own frame, a static token (or static cluster) at its spatial location in
its window's FIRST frame. The frame of every token is therefore exact, and every group of the
official split lies inside one frame: a window's non-first frames hold exactly that frame's
dynamic group; its first frame holds the window's static group AND that frame's dynamic group, at
disjoint locations. Which of that frame's tokens are static cannot be told from positions once
stage A has clustered (its cluster centres are arbitrary members), and the window bounds cannot
be told either (they only matter through the static group). So the groups here are the frames
(per video): every frame keeps ``floor(n_f * alpha)`` of its ``n_f`` tokens. This equals the
official rule on every frame except a window's first frame, where the static and dynamic tokens
are ranked together (``floor((s + d) alpha)`` instead of ``floor(s alpha) + floor(d alpha)``: at
most one token more per window, and the alpha share is split between them by score instead of
by group). An exact split would need the engine to carry stage A's group of each token into
``StageInputs``.

Retention ratio ``r``: the nominal share of the ORIGINAL ``T * P`` video tokens kept after stage B,
``r = gamma * alpha`` (gamma = ``cluster_ratio``, the stage-A share; alpha the stage-B share). One of
the two is derived from ``r``: by default gamma = max(0.5, sqrt(r)) and alpha = r / gamma, i.e.
the official gamma = 0.5 and alpha = 2r up to r = 0.25 (the papers' regime), and gamma = alpha =
sqrt(r) above, so that both stages stay active up to r = 1 (no official setting exists there;
r = 0.6 gives 0.775 each); ``alpha=`` fixes alpha and
sets gamma = r / alpha (needs alpha >= r); ``cluster_ratio=`` fixes gamma and sets alpha = r / gamma
(needs gamma >= r); giving both is refused (``r`` fixes their product). ``r = 0.2`` reproduces the
official scripts (gamma 0.5, alpha 0.4; inllm_methods.md 6.3); ``r = 0.25`` gives alpha 0.5. The real
count is below ``r T P``: stage A keeps exactly ``floor(gamma T P)`` tokens (fewer when static
averaging alone leaves fewer), and stage B floors per frame (up to one token per frame lost). alpha
is taken on the decimal values as written (``Fraction``), so ``floor(10 * 0.25 / 0.5) = 5`` exactly.
The layer-averaged retention (reported by the engine) counts layers ``0..S_sel`` at stage A's share.

Defaults (official ``scripts/eval.sh``, MVBench / VideoMME / EgoSchema on PLLaVA's 32-layer
LLaMA): ``selected_layer = 10`` of 32, moved to other depths as the stage layer
``K = layer_scaled(11, 32, L)`` (``S_sel = K - 1``): 28 layers (Qwen2-7B) -> 9, 36 (Qwen3-VL-8B)
-> 11, 2 and 3 (tiny test models) -> 0; ``tau = 0.8``, ``temporal_segment_ratio = 0.25``,
``dpc_k = 7``, ``min_cluster_tokens = 14`` (stage A); gamma / alpha as above. VCG-Bench's official
``selected_layer = 5`` is a parameter away. Model inputs: none.

Variants (``variant=``; the same parameters and defaults):

``"paper"`` (default): everything in this docstring.

``"official"``: stage A is ``prunevid_stage_a`` ``variant="official"`` (the release's
``merge_frames_dynamic`` bit for bit, ``cluster_ratio`` = gamma, ``seed`` for its density noise);
stage B is the release's ``VTPWindowCache.process_attention`` (``elastic_cache.py`` L120-154):
the pre-RoPE, unmasked map in the model's dtype as the release computes it (``q k^T / sqrt(d)`` in
the model's dtype, float32 softmax rounded to it: ``LLMPlan.score_dtype="model"``,
``score_scale="divide"``), max over heads then over the query rows, per window the ``topk`` of
``int(s * alpha)`` static outputs and per frame of ``int(d * alpha)`` dynamic ones, ``alpha`` a
float (``float(ratio / gamma)``, or the ``alpha`` given) and the count a truncated float product
(``int(100 * 0.29) = 28``). The deviation of ``paper`` "stage B cannot tell stage A's static
tokens from the first frame's dynamic ones" is **reproduced away**: the official stage A places
its outputs at slots that encode the groups (a window's static outputs from patch 0 of its first
frame, a frame's dynamic ones ending at patch ``P - 1``; see
:mod:`baselines.prunevid_stage_a_official`), and stage B reads them back. This is exact unless a
window's first frame is filled by both groups unclustered (only when ``P <= 28`` or gamma = 1),
where that frame is ranked as one group. Measured against the release's ``process_attention``
loaded at run time, fed the release's own stage-A sizes, on the same hand-made attention
(T 8-32, P 36-196, alpha 0.29-0.7, ties): kept sets fp32 120/120 and bf16 120/120 exact; the
group read-back from our slots equals the release's static / dynamic partition on every case
with ``P > 28`` (fp32 and bf16; the 9 misses in 240 stage-A cases are all ``P = 16``); the
``paper`` grouping (frames) on the same scores would have changed the kept set in 63/120 (fp32) and
61/120 (bf16) cases, about 0.6-0.7% of the kept tokens (355 of 51,908 and 358 of 61,518 set
memberships differ)
(a comparison outside the project, docs/fidelity.md). Still not reproduced
(both variants): the KV cache of layers ``0..S_sel`` is not gathered to the kept set (decode
steps there still see every stage-A token; the prefill and so the first generated token are
unaffected), the queries include LLaVA-OneVision's newline token after the video, GQA is
handled, batches and several videos per row work. The release is PLLaVA-only (1-D RoPE); on
Qwen3-VL the official slots give the stage-A outputs MRoPE coordinates unrelated to their content.

Deliberate deviations of ``variant="paper"`` from the official code:

* groups are frames, not (window static set, frame dynamic sets) (above);
* the official code also gathers the KV cache of layers ``0..S_sel`` to the kept set, so that
  decode steps attend only to kept tokens in every layer; here layers ``0..S_sel`` keep their full
  cache (the engine, :mod:`vcast.models.layer_drops`, shortens only the layers after a drop), so
  decode tokens still see every stage-A token in the early layers;
* scores are recomputed for the query rows only (``vcast.models.attention_rows``) instead of the
  eager full map; no ``scores="eager"`` option, because the eager kernel's weights are post-RoPE
  and causal while the official map is pre-RoPE and unmasked. Grouped-query attention is handled
  (the official matmul assumes LLaMA-2's one KV head per head); on Qwen3-VL "pre-RoPE" is after
  its per-head ``q_norm`` / ``k_norm`` (inllm_methods.md 6.4);
* the queries are every token after the row's last video token (LLaVA-OneVision's trailing
  newline included), every video of a row is handled (frames grouped per video), and batches of
  several rows work (the official code asserts batch 1 and one image span);
* a row with no token after its video has no query: nothing is dropped (the official code
  would fail on an empty map);
* stage A's own deviations (exact budget ``floor(gamma T P)``, deterministic DPC-kNN, ...) are
  listed in ``baselines/prunevid_stage_a.py``.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction
from typing import Optional

import torch

from baselines.prunevid_stage_a import check_stage_a_params
from baselines.prunevid_stage_a_official import read_groups
from vcast.models.llm_plan import LLMInfo, LLMPlan, LLMStage, StageChoice, StageInputs, layer_scaled
from vcast.registry import register_llm_method
from vcast.validation import check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

REFERENCE_LAYERS = 32  # PLLaVA-7B's LLaMA
REFERENCE_SELECTED_LAYER = 10  # scripts/eval.sh (MVBench, VideoMME, EgoSchema)
DEFAULT_CLUSTER_RATIO = 0.5  # gamma, scripts/eval.sh
VARIANTS = (PAPER, OFFICIAL)


def default_selected_layer(num_layers: int) -> int:
    """``S_sel``: the official 10 of 32, moved as the stage layer ``S_sel + 1`` to ``num_layers``."""
    return layer_scaled(REFERENCE_SELECTED_LAYER + 1, REFERENCE_LAYERS, num_layers) - 1


def split_ratio(ratio: float, alpha: Optional[float], cluster_ratio: Optional[float]) -> tuple[float, Fraction]:
    """``(gamma, alpha)`` with ``gamma * alpha == ratio`` (see the module docstring); alpha exact."""
    r = Fraction(repr(float(ratio)))
    if alpha is not None and cluster_ratio is not None:
        raise ValueError("give at most one of alpha and cluster_ratio: the ratio fixes their product "
                         f"(ratio {ratio}, alpha {alpha}, cluster_ratio {cluster_ratio})")
    if alpha is not None:
        alpha = check_range("alpha", alpha, 0.0, 1.0)
        a = Fraction(repr(alpha))
        if a < r:
            raise ValueError(f"alpha must be >= the ratio {ratio} (stage A keeps ratio / alpha <= 1), got {alpha}")
        return float(r / a), a
    if cluster_ratio is not None:
        cluster_ratio = check_range("cluster_ratio", cluster_ratio, 0.0, 1.0)
        gamma = Fraction(repr(cluster_ratio))
        if gamma < r:
            raise ValueError(f"cluster_ratio must be >= the ratio {ratio} (stage B keeps ratio / cluster_ratio "
                             f"<= 1), got {cluster_ratio}")
        return cluster_ratio, r / gamma
    # Official gamma up to r = 0.25; above, gamma = alpha = sqrt(r), so stage B never vanishes.
    gamma = max(DEFAULT_CLUSTER_RATIO, math.sqrt(float(r)))
    return gamma, r / Fraction(repr(gamma))


def max_max_scores(inputs: StageInputs) -> torch.Tensor:
    """float32 ``[N]``: per video token, the max over heads and then over the query rows of
    ``inputs.attention`` [H, R, S]."""
    return inputs.attention.float().amax(dim=0).amax(dim=0).index_select(0, inputs.visual)


def group_top_share(scores: torch.Tensor, groups: torch.Tensor, alpha: Fraction) -> torch.Tensor:
    """Per group, the top ``floor(n_g * alpha)`` of ``scores`` [N] (ties to the lower index).

    Args:
        scores: float ``[N]``.
        groups: LongTensor ``[N]`` group key of each token (any integers).
        alpha: the share, exact.
    Returns:
        LongTensor ascending indices into ``scores``.
    """
    if scores.numel() == 0:
        return torch.zeros(0, dtype=torch.long, device=scores.device)
    _, group_of, sizes = torch.unique(groups, return_inverse=True, return_counts=True)
    # Exact floor(n * alpha) on the host (one number per group; n * numerator can exceed int64).
    quotas = torch.tensor([n * alpha.numerator // alpha.denominator for n in sizes.tolist()],
                          dtype=torch.long, device=scores.device)
    # Order by group, then score descending, then index: two stable sorts.
    by_score = torch.sort(scores, descending=True, stable=True).indices
    order = by_score[torch.sort(group_of[by_score], stable=True).indices]
    starts = torch.cumsum(sizes, 0) - sizes
    rank = torch.arange(order.numel(), device=scores.device) - starts[group_of[order]]
    kept = order[rank < quotas[group_of[order]]]
    return torch.sort(kept).values


def stage_b_choose(inputs: StageInputs, alpha: Fraction) -> StageChoice:
    """PruneVid stage B on one row: keep the top ``floor(n_f * alpha)`` tokens of every frame
    (per video) by the max-max pre-RoPE text attention."""
    count = inputs.visual.numel()
    if inputs.attention is None:
        logger.debug("prunevid: no query token after the video at layer %d; nothing dropped", inputs.layer)
        return StageChoice(keep=torch.arange(count, device=inputs.visual.device))
    scores = max_max_scores(inputs)
    frames_per_video = int(inputs.frames.max()) + 1 if count else 1
    groups = inputs.videos * frames_per_video + inputs.frames
    keep = group_top_share(scores, groups, alpha)
    logger.debug("prunevid: stage B at layer %d keeps %d of %d video tokens (alpha %s)", inputs.layer,
                 keep.numel(), count, alpha)
    return StageChoice(keep=keep)


def official_stage_b_choose(inputs: StageInputs, alpha: float) -> StageChoice:
    """The release's ``process_attention`` on one row: scores = max over heads, then over the query
    rows, in the attention's dtype; per window the top ``int(s * alpha)`` of its static outputs and,
    per frame, the top ``int(d * alpha)`` of its dynamic ones (``topk`` order; the groups read back
    from stage A's slots by :func:`baselines.prunevid_stage_a_official.read_groups`)."""
    count = inputs.visual.numel()
    if inputs.attention is None:
        logger.debug("prunevid (official): no query token after the video at layer %d; nothing dropped", inputs.layer)
        return StageChoice(keep=torch.arange(count, device=inputs.visual.device))
    scores = inputs.attention.max(dim=0)[0].max(dim=0)[0].index_select(0, inputs.visual)
    kept = [torch.zeros(0, dtype=torch.long, device=scores.device)]
    for video in torch.unique(inputs.videos).tolist():
        members = (inputs.videos == video).nonzero().squeeze(1)  # ascending columns: the release's order
        frames = inputs.frames.index_select(0, members)
        static = read_groups(frames, inputs.patches.index_select(0, members))
        for frame in torch.unique(frames).tolist():
            in_frame = frames == frame
            for group in (members[in_frame & static], members[in_frame & ~static]):
                if group.numel():
                    _, top = torch.topk(scores.index_select(0, group), k=int(group.numel() * alpha), dim=-1)
                    kept.append(group[top])
    keep = torch.sort(torch.cat(kept)).values
    logger.debug("prunevid (official): stage B at layer %d keeps %d of %d video tokens (alpha %s)", inputs.layer,
                 keep.numel(), count, alpha)
    return StageChoice(keep=keep)


@register_llm_method("prunevid", variants=VARIANTS)
def prunevid_plan(ratio: float, llm: LLMInfo, *, alpha: Optional[float] = None,
                  cluster_ratio: Optional[float] = None, selected_layer: Optional[int] = None,
                  tau: float = 0.8, temporal_segment_ratio: float = 0.25, dpc_k: int = 7,
                  min_cluster_tokens: int = 14, variant: str = PAPER, seed: int = 0) -> LLMPlan:
    """Stage A (``prunevid_stage_a`` at ``cluster_ratio``) before the LLM, stage B after layer
    ``selected_layer``; see the module docstring.

    Args:
        ratio: nominal share of the original video tokens kept after stage B (``gamma * alpha``).
        alpha: stage B's share per frame in [0, 1] (>= ratio); None: ratio / gamma.
        cluster_ratio: stage A's share gamma in [0, 1] (>= ratio); None: max(0.5, sqrt(ratio)),
            or ratio / alpha when ``alpha`` is given.
        selected_layer: ``S_sel`` in ``[0, L - 2]``, the layer whose attention ranks the tokens
            (layers after it see the kept ones); None: the official 10 of 32, scaled.
        tau, temporal_segment_ratio, dpc_k, min_cluster_tokens: stage A's (``prunevid_stage_a``).
        variant: ``"paper"`` or ``"official"`` (module docstring).
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
    if variant == OFFICIAL:  # the release's float alpha, int() counts, scores in the model's dtype
        alpha_float = float(share) if alpha is None else float(alpha)
        stage = LLMStage(layer=selected_layer + 1, choose=lambda inputs: official_stage_b_choose(inputs, alpha_float),
                         queries="text", score_layer=selected_layer, rotary=False, causal=False)
        return LLMPlan(
            stages=(stage,), pre_method="prunevid_stage_a", pre_ratio=gamma,
            pre_params={"tau": tau, "temporal_segment_ratio": temporal_segment_ratio, "dpc_k": dpc_k,
                        "min_cluster_tokens": min_cluster_tokens, "variant": OFFICIAL, "seed": seed},
            positions="original", scores="rows", score_dtype="model", score_scale="divide",
        )
    stage = LLMStage(layer=selected_layer + 1, choose=lambda inputs: stage_b_choose(inputs, share),
                     queries="text", score_layer=selected_layer, rotary=False, causal=False)
    return LLMPlan(
        stages=(stage,), pre_method="prunevid_stage_a", pre_ratio=gamma,
        pre_params={"tau": tau, "temporal_segment_ratio": temporal_segment_ratio, "dpc_k": dpc_k,
                    "min_cluster_tokens": min_cluster_tokens},
        positions="original", scores="rows",
    )
