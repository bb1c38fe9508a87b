"""V-CAST as the released code computes it (``variant="official"``), in the input dtype.

Follows xinyouu/V-CAST @c235ef3, ``compressor/v_cast/modeling_qwen3_vl_v_cast.py``
(``_v_cast_compress_frames`` and the per-video loop of ``v_cast_compress_qwen3``). Written from
that code and checked against the release at run time outside the project; the arithmetic is the
same torch calls in the same dtypes, so a bf16 video gives the release's bf16 answer:

* frame means ``frames.mean(dim=1)`` and ``F.normalize(..., eps=1e-6)`` in the input dtype;
* curvature ``1 - F.cosine_similarity(v_in, v_out, eps=1e-6)`` in the input dtype (norms clamped
  at ``eps``, nothing added to the denominator), constant 1 at both ends;
* density ``softmax(float(kappa) / tau)`` in float32;
* budget ``round(r T P)`` (half to even) clipped to ``[1, T P]`` and raised to ``T k_min``, then
  the released allocator (:func:`vcast.allocation.allocate_official`: the leftover piles onto the
  frame with the largest fractional part);
* per frame ``(1 - F.cosine_similarity(x_ti, x_hat_t, eps=1e-6))`` in the input dtype, then float32,
  plus the float32 min-max normalised token norm; ``topk(b_t, sorted=False)`` then ``sort`` (the
  kernel's tie order, as there); one frame at a time, the same shapes as the release;
* a video with ``T <= 1`` is kept whole.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vcast.allocation import allocate_official, trim_official_excess
from vcast.budget import official_total_budget
from vcast.selection import Selection

# The release's eps of F.normalize and both F.cosine_similarity calls, and of its min-max.
EPS = 1e-6


def official_curvature(directions: torch.Tensor) -> torch.Tensor:
    """``kappa`` [T] in ``directions``' dtype from unit frame means [T, D] (T >= 2).

    Interior: ``1 - F.cosine_similarity(x_t - x_{t-1}, x_{t+1} - x_t, eps=1e-6)``; both ends are
    the constant 1 (so T = 2 gives [1, 1]).
    """
    v_in = directions[1:-1] - directions[:-2]
    v_out = directions[2:] - directions[1:-1]
    interior = 1.0 - F.cosine_similarity(v_in, v_out, dim=-1, eps=EPS)
    end = torch.ones(1, device=directions.device, dtype=interior.dtype)
    return torch.cat([end, interior, end])


def official_frame_scores(tokens: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """Float32 scores [P] of one frame's tokens [P, D] against its unit mean [D]: the cosine
    outlier term in the input dtype, then float32, plus the float32 min-max normalised norm."""
    outlier = (1.0 - F.cosine_similarity(tokens, direction.unsqueeze(0), dim=-1, eps=EPS)).float()
    norms = tokens.float().norm(dim=-1)
    low, high = norms.min(), norms.max()
    return outlier + (norms - low) / (high - low + EPS)


def official_vcast_select(frames: torch.Tensor, ratio: float, tau: float, k_min: int) -> Selection:
    """The released selection of ``frames`` [T, P, D] (any float dtype), ``K`` tokens.

    Args:
        frames: [T, P, D] video tokens; scored in their own dtype as the release does.
        ratio: retention ratio r in (0, 1].
        tau: softmax temperature (0.7 in the release).
        k_min: tokens every frame keeps at least (1 in the release).
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and the density [T] (float32).
    """
    num_frames, tokens_per_frame, _ = frames.shape
    device = frames.device
    if num_frames <= 1:  # the release compresses only videos of two or more temporal patches
        return Selection(
            keep=torch.arange(num_frames * tokens_per_frame, device=device),
            budgets=torch.full((num_frames,), tokens_per_frame, dtype=torch.long, device=device),
            tokens_per_frame=tokens_per_frame,
            frame_weights=torch.ones(num_frames, device=device),
        )
    frames = frames.contiguous()  # the release reduces over a contiguous view of the merger output
    directions = F.normalize(frames.mean(dim=1), dim=-1, eps=EPS)  # [T, D], input dtype
    density = torch.softmax(official_curvature(directions).float() / tau, dim=0)
    total = official_total_budget(ratio, num_frames, tokens_per_frame, k_min)
    budgets = allocate_official(density, total, tokens_per_frame, k_min)
    budgets = trim_official_excess(budgets, density, total, k_min)
    kept = []
    for t, k in enumerate(budgets.tolist()):
        if k <= 0:
            continue
        scores = official_frame_scores(frames[t], directions[t])
        top = torch.topk(scores, k, largest=True, sorted=False).indices
        kept.append(torch.sort(top).values + t * tokens_per_frame)
    return Selection(keep=torch.cat(kept), budgets=budgets, tokens_per_frame=tokens_per_frame, frame_weights=density)
