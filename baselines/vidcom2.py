"""VidCom2: frame-uniqueness budgets + per-frame outlier-token pruning.

Paper: "Video Compression Commander: Plug-and-Play Inference Acceleration for Video Large
Language Models" (VidCom², EMNLP 2025). Official code: xuyang-liu16/VidCom2 @944a17d (``main``;
the ``qwen`` branch @a85d485 has the same core), ``token_compressor/vidcom2/vidcom2.py``;
see ``shared/design/reference_methods.md`` sections 4.1 (algorithm), 4.2-4.3 (integrations).

Algorithm, on the LLM-space video tokens ``frames`` [T, P, D] (all in float32):

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
* ``allocation="official"``: the released per-frame rule
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

Deliberate deviations from the official code:

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

import torch

from baselines.selection_output import selection_from_positions
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

logger = logging.getLogger(__name__)

TEMPORAL_CHOICES = ("uniqueness", "curvature")
ALLOCATION_CHOICES = ("paper", "official")


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


@register_method("vidcom2", inputs=())
def vidcom2_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    temporal: str = "uniqueness",
    allocation: str = "paper",
    tau: float = 0.7,
) -> Selection:
    """Keep, in each frame, the tokens least similar to the video and frame centres.

    Args:
        frames: [T, P, D] LLM-space video tokens, any float dtype (checked by ``vcast.select``).
        ratio: retention ratio r in (0, 1].
        temporal: ``"uniqueness"`` (VidCom2's budgets) or ``"curvature"`` (V-CAST's budgets).
        allocation: ``"paper"`` (exactly ``floor(r T P)`` tokens) or ``"official"`` (the
            released per-frame rounding; uniqueness only). See the module docstring.
        tau: softmax temperature of ``temporal="curvature"`` (> 0; unused otherwise).
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and the temporal density [T].
    """
    check_choice("temporal", temporal, TEMPORAL_CHOICES)
    check_choice("allocation", allocation, ALLOCATION_CHOICES)
    tau = check_positive("tau", tau)
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
