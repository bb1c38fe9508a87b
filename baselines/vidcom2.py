"""VidCom2: frame-uniqueness budgets + per-frame outlier-token pruning.

Paper: "Video Compression Commander: Plug-and-Play Inference Acceleration for Video Large
Language Models" (VidCom², EMNLP 2025). Official code: xuyang-liu16/VidCom2 @944a17d (``main``;
the ``qwen`` branch @a85d485 has the same core), ``token_compressor/vidcom2/vidcom2.py``;
the algorithm is below; which model code runs it for each paper row: ``docs/fidelity.md``.

Variants (``variant=``):

* ``"paper"`` (default): the algorithm below in float32 whatever the input dtype (bf16 and
  float32 input give the same result), exact budgets by default, deterministic ties.
* ``"official"``: the released code bit for bit on CPU, in the input dtype
  (:mod:`baselines.vidcom2_official`): ``main`` @944a17d ``vidcom2.py`` L15-103 (linear mapping,
  LLaVA-OV / LLaVA-Video token space) and the ``qwen``-branch Qwen3-VL / Qwen2.5-VL wrapper
  ``_compute_keep_indices`` (@a85d485, ``models/qwen3_vl.py`` L20-33), which computes the same
  thing for ``T`` temporal patches of ``P = h w / 4`` tokens (no ``T <= 1`` skip in either).
  It implies ``allocation="official"`` and takes no other allocation, nor
  ``temporal="curvature"`` (the "+V-CAST budgeting" ablation is ours: paper only). Its
  ``mean q`` is the release's ``probs.mean()``; ``D = 1`` and a bf16 count above P (P > 256 not
  held by bf16, r near 1) raise a ValueError where the release fails. Measured against the
  release loaded at run time (a comparison outside the project, docs/fidelity.md:
  random, near-static, tied and duplicated-token videos, T = 1..32, P = 1..513, r = 0.01..1):
  fp32 351/351, bf16 349/349, fp16 351/351 kept sets and counts exact (plus 8-10 cases per dtype
  where both refuse); ``variant="paper", allocation="official"`` agrees on only 322/351 fp32 and
  61/349 bf16 of the same cases.

Algorithm (``variant="paper"``), on the LLM-space video tokens ``frames`` [T, P, D] (all in float32):

1. keep the ``int(D / 2)`` channels with the lowest population variance over all ``T * P``
   tokens and L2-normalise every token on them;
2. ``v_ti = S(x_ti, c_v)`` and ``f_ti = S(x_ti, c_t)`` with the video centre ``c_v`` (mean of all
   tokens) and frame centre ``c_t`` (mean of frame t), not renormalised, and the multi-scale
   Gaussian similarity ``S(x, c) = sum_{a in 1/8, 1/4, 1/2, 1, 2} exp(-|x - c|^2 / 2a)``;
3. frame uniqueness ``q = softmax((u - max u) / 0.01)``, ``u_t = -mean_i v_ti``;
4. frame budgets (below);
5. frame t keeps its ``b_t`` tokens with the smallest ``v + f`` (most unlike both centres).
Steps 1-3 are shared with V-CAST's ``temporal="uniqueness"`` ablation (:mod:`vcast.temporal`).

Frame budgets:

* ``temporal="uniqueness"`` (default), ``allocation="paper"`` (default): the density
  ``p_t = (1 + q_t - 1/T) / T`` (VidCom2's scale ``r (1 + q_t - 1/T)`` normalised) apportioned
  exactly to ``B = floor(r T P)`` by :func:`vcast.allocation.allocate_paper` with ``k_min = 1``
  when ``B >= T`` (else 0), so the method keeps exactly ``B`` tokens.
* ``allocation="official"`` (kept for old configs; ``variant="official"`` implies it): the
  released per-frame rule, scored in float32 with ``1/T`` for ``mean q``,
  ``b_t = max(1, round_half_even(min(1, r (1 + q_t - 1/T)) * P))``. Its total is only about
  ``r T P`` (e.g. 22 instead of 24 for T=4, P=12, r=0.5 with one unique frame) and every frame
  keeps at least one token even when ``r T P < T``; ``r = 1`` does not keep every token.
* ``temporal="curvature"``: the "+V-CAST budgeting" variant (fig:ablation_budget_others):
  V-CAST's density ``softmax(curvature / tau)`` of the unit frame means (``tau = 0.7``) with
  V-CAST's paper allocation (``B = max(floor(r T P), T)``, ``allocate_paper(k_min=1)``), i.e.
  exactly ``vcast.select(frames, r, method="vcast").budgets``; only the token choice is
  VidCom2's. It takes ``allocation="paper"`` only.

Defaults (every retention ratio): channel fraction 0.5, scales {1/8, ..., 2}, temperature 0.01
(module constants of :mod:`vcast.temporal`, fixed in the official code); the official
scripts use R_RATIO = 0.25. No model inputs: the method needs no attention (FlashAttention-safe).
Pure pruning: kept tokens are returned by index, so adapters keep each at its original position.

Deliberate deviations of ``variant="paper"`` from the official code (``variant="official"`` has none):

* Exact budget ``B = floor(r T P)`` by default instead of per-frame half-to-even rounding
  clamped to ``>= 1`` (``allocation="official"`` restores it).
* Every score is computed in float32 whatever the input dtype (the official code scores in the
  features' dtype, bf16 for the released models).
* Ties (channel variances, token scores) go to the lower index; the official ``topk`` leaves them
  to the kernel. ``probs.mean()`` is written ``1/T`` (equal up to float rounding).
* ``D = 1`` keeps its one channel (the official ``int(0.5 D)`` would keep none).
"""

from __future__ import annotations

import logging
from typing import Optional

import torch

from baselines.common.selection_output import selection_from_positions
from baselines.vidcom2_official import official_keep
from vcast.allocation import allocate_paper
from vcast.budget import paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.spatial import top_per_frame
from vcast.temporal import (
    low_variance_unit_tokens,
    multiscale_gaussian_similarity,
    temporal_weights,
    uniqueness_softmax,
    video_centre_similarity,
)
from vcast.validation import check_choice, check_positive
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

TEMPORAL_CHOICES = ("uniqueness", "curvature")
ALLOCATION_CHOICES = ("paper", "official")
VARIANTS = (PAPER, OFFICIAL)


def official_frame_budgets(q: torch.Tensor, ratio: float, tokens_per_frame: int) -> torch.Tensor:
    """The released rule ``b_t = max(1, round_half_even(min(1, r (1 + q_t - 1/T)) * P))``.

    Args:
        q: [T] float32 frame uniqueness (softmax at temperature 0.01).
        ratio: r.
        tokens_per_frame: P.
    Returns:
        LongTensor [T]; its sum is only about ``r T P``.
    """
    scale = (ratio * (1 + q - 1 / q.numel())).clamp(max=1.0)
    return torch.round(scale * tokens_per_frame).long().clamp_min(1)  # torch.round: half to even


@register_method("vidcom2", inputs=(), variants=VARIANTS)
def vidcom2_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    temporal: str = "uniqueness",
    allocation: Optional[str] = None,
    tau: float = 0.7,
    variant: str = PAPER,
) -> Selection:
    """Keep, in each frame, the tokens least similar to the video and frame centres.

    Args:
        frames: [T, P, D] LLM-space video tokens, any float dtype (checked by ``vcast.select``).
        ratio: retention ratio r in (0, 1].
        temporal: ``"uniqueness"`` (VidCom2's budgets) or ``"curvature"`` (V-CAST's budgets).
        allocation: ``"paper"`` (exactly ``floor(r T P)`` tokens) or ``"official"`` (the
            released per-frame rounding; uniqueness only). None: ``"paper"`` for
            ``variant="paper"``, ``"official"`` for ``variant="official"`` (which takes no other).
        tau: softmax temperature of ``temporal="curvature"`` (> 0; unused otherwise).
        variant: ``"paper"`` (float32 scores) or ``"official"`` (the release, in ``frames``'
            dtype; uniqueness budgets with the official rounding only). See the module docstring.
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and the temporal density [T] (float32).
    """
    variant = check_variant("vidcom2", variant, VARIANTS)
    if allocation is None:
        allocation = "official" if variant == OFFICIAL else "paper"
    check_choice("temporal", temporal, TEMPORAL_CHOICES)
    check_choice("allocation", allocation, ALLOCATION_CHOICES)
    tau = check_positive("tau", tau)
    if variant == OFFICIAL:
        if temporal != "uniqueness":
            raise ValueError("vidcom2: temporal='curvature' (the '+V-CAST budgeting' ablation) has "
                             "variant='paper' only")
        if allocation != "official":
            raise ValueError("vidcom2: variant='official' uses the released allocation='official' only")
        return _official_select(frames, ratio)
    if temporal == "curvature" and allocation != "paper":
        raise ValueError("allocation='official' is VidCom2's rounding of its uniqueness scale; "
                         "temporal='curvature' takes V-CAST's allocation='paper' only")
    num_frames, tokens_per_frame, _ = frames.shape

    tokens = low_variance_unit_tokens(frames)  # [T, P, C] float32, unit rows
    video_sim = video_centre_similarity(tokens)  # [T, P]
    frame_sim = multiscale_gaussian_similarity(tokens, tokens.mean(dim=1, keepdim=True))  # [T, P]

    if temporal == "curvature":
        density = temporal_weights("curvature", frames, frame_stats(frames).means, tau, seed=0)
        total = paper_total_budget(ratio, num_frames, tokens_per_frame, k_min=1)
        budgets = allocate_paper(density, total, tokens_per_frame, k_min=1)
    else:
        q = uniqueness_softmax(video_sim)
        density = (1 + q - 1 / num_frames) / num_frames
        if allocation == "official":
            budgets = official_frame_budgets(q, ratio, tokens_per_frame)
            total = int(budgets.sum())
        else:
            total = paper_total_budget(ratio, num_frames, tokens_per_frame, k_min=0)
            k_min = 1 if total >= num_frames else 0
            budgets = allocate_paper(density, total, tokens_per_frame, k_min=k_min)

    # Smallest v + f first; top_per_frame keeps the largest, ties to the lower token index.
    keep = top_per_frame(-(video_sim + frame_sim), budgets, total)
    logger.debug("vidcom2: T=%d P=%d r=%.4g -> K=%d (%s temporal, %s allocation)",
                 num_frames, tokens_per_frame, ratio, total, temporal, allocation)
    return selection_from_positions(keep, num_frames, tokens_per_frame, frame_weights=density)


def _official_select(frames: torch.Tensor, ratio: float) -> Selection:
    """``variant="official"`` (:mod:`baselines.vidcom2_official`); frame weights are the float32
    of the release's ``(1 + q - mean q) / T``."""
    num_frames, tokens_per_frame, _ = frames.shape
    keep, counts, q = official_keep(frames, ratio)
    q = q.float()
    density = (1 + q - q.mean()) / num_frames
    logger.debug("vidcom2 official: T=%d P=%d r=%.4g %s -> K=%d", num_frames, tokens_per_frame, ratio,
                 frames.dtype, keep.numel())
    return selection_from_positions(keep, num_frames, tokens_per_frame, frame_weights=density)
