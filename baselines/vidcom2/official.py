"""VidCom2 ``variant="official"``: the released selection, arithmetic in the input dtype.

Follows xuyang-liu16/VidCom2 ``token_compressor/vidcom2/vidcom2.py`` (``main`` @944a17d, byte-identical
on ``qwen`` @a85d485), ``vidcom2_compression`` L15-36 with the linear index mapping of LLaVA-OV
and Qwen (L83-103), and the ``qwen``-branch Qwen3-VL / Qwen2.5-VL wrapper ``_compute_keep_indices``
(``models/qwen3_vl.py`` L20-33, ``models/qwen2_5_vl.py`` L20-33). The wrapper changes nothing for a
video of ``T`` temporal patches of ``P = h w / 4`` tokens: it calls the same four steps with
``P`` as the frame length and as the index stride (the LLaVA entry point uses
``rows // T = P``), and neither entry point skips ``T = 1``. So one function serves the LLaVA-OV,
LLaVA-Video and Qwen rows; ``frames`` is [T, P, D] with T frames (LLaVA) or temporal patches (Qwen).

Every step runs in ``frames``' dtype (bf16 for the released models), with the torch calls the
release makes, in its order, so ties and roundings are theirs:

1. ``var(dim=0, unbiased=False)`` of the [T P, D] tokens; the ``int(D * 0.5)`` channels of
   ``topk(largest=False)`` (ascending variance, the kernel's tie order), gathered in that order
   (``D = 1`` leaves no channel and the release's ``view`` fails: a ValueError here);
2. ``F.normalize`` (L2, eps 1e-12) on them, video centre ``mean(dim=(0, 1))``, frame centres
   ``mean(dim=1)``;
3. ``S(x, c) = 0 + exp(-|x - c|^2 / 0.25) + exp(... / 0.5) + exp(... / 1.0) + exp(... / 2) +
   exp(... / 4)``, added left to right in the dtype;
4. ``q = softmax((u - max u) / 0.01)`` with ``u = -mean_i v_ti``;
   ``scale = clamp_max(r (1 + q - mean q), 1)`` (``mean q``, not ``1/T``);
   ``k_t = clamp_min(round_half_even(scale_t * P), 1)``; ``scale_t * P`` is rounded to the dtype
   first, so in bf16 e.g. P = 196 counts are on a grid of 0.25..1 and ``sum k_t`` is only about
   ``r T P`` (never renormalised; T = 1 gives ``round(r P)``);
5. per frame ``topk(v + f, k_t, largest=False, sorted=False)`` then ``sort``; index
   ``t P + i``. The kept set ascends.

Quirk reproduced as a refusal: in bf16 a P above 256 that bf16 cannot hold (e.g. 259) can make
``k_t`` exceed P at ``scale_t = 1`` (r near 1), where the release's ``topk`` raises; we raise a
ValueError. Not expressible here: LLaVA-Video's grid mapper (L105-115) returns each frame's 13
row-newline tokens after its kept tokens; the selection is in the T x P token space and the
adapter places newlines.

Compared with the release loaded at run time (``vidcom2_compression`` and both ``qwen``-branch
wrappers; a comparison outside the project, CPU, one thread); where the release fails (D = 1, a
bf16 count above P) this module raises. Measured agreement with the release: docs/fidelity.md,
section "VidCom²". On a GPU the reductions (var, norm, means, sums) are the device's kernels:
equal to the release run on the same device and torch build, not to CPU (not measured here: no
GPU in this task).
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from baselines.common.selection_output import selection_from_positions
from vcast.selection import Selection

logger = logging.getLogger(__name__)

CHANNEL_RATIO = 0.5
TEMPERATURE = 0.01
ALPHAS = (0.125, 0.25, 0.5, 1, 2)  # 2 ** k for k in -3..1 (the last two are ints in the release)


def official_similarities(frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Steps 1-3 in ``frames``' dtype.

    Args:
        frames: [T, P, D] float tokens.
    Returns:
        (v, f): [T, P] multi-scale Gaussian similarities to the video and frame centres, in
        ``frames``' dtype.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    if int(dim * CHANNEL_RATIO) < 1:
        raise ValueError(f"vidcom2 official: D = {dim} leaves no channel (int(D * 0.5) = 0); "
                         "the released code fails here too")
    flat = frames.reshape(num_frames * tokens_per_frame, dim).contiguous()
    variances = flat.var(dim=0, unbiased=False)
    channels = torch.topk(variances, k=int(dim * CHANNEL_RATIO), largest=False).indices
    tokens = F.normalize(flat[:, channels].view(num_frames, tokens_per_frame, -1), dim=-1)
    video_centre = tokens.mean(dim=(0, 1), keepdim=True)  # [1, 1, C]
    frame_centre = tokens.mean(dim=1, keepdim=True)  # [T, 1, C]
    return _gaussian(tokens, video_centre), _gaussian(tokens, frame_centre)


def _gaussian(tokens: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
    """[T, P]: the five kernels summed from 0, left to right, in the dtype of ``tokens``."""
    sq_dist = ((tokens - centre) ** 2).sum(dim=-1)
    total: object = 0  # Python's sum starts from int 0; 0 + t is t exactly
    for alpha in ALPHAS:
        total = total + torch.exp(-sq_dist / (2 * alpha))
    return total  # type: ignore[return-value]


def official_frame_counts(video_sim: torch.Tensor, ratio: float,
                          tokens_per_frame: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 4 in ``video_sim``'s dtype.

    Args:
        video_sim: [T, P] ``v``.
        ratio: r (a Python float, like the release's ``float(R_RATIO)``).
        tokens_per_frame: P.
    Returns:
        (counts, q): LongTensor [T] ``k_t`` and the [T] softmax ``q`` (dtype of ``video_sim``).
    """
    uniqueness = -video_sim.mean(dim=-1)
    q = F.softmax((uniqueness - uniqueness.max()) / TEMPERATURE, dim=0)
    scale = (ratio * (1 + q - q.mean())).clamp(max=1.0)
    counts = (scale * tokens_per_frame).round().long().clamp(min=1)  # torch.round: half to even
    return counts, q


def official_keep(frames: torch.Tensor, ratio: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The released VidCom2 selection (module docstring).

    Args:
        frames: [T, P, D] float tokens; the scores are computed in their dtype.
        ratio: r in (0, 1].
    Returns:
        (keep, counts, q): ascending flat indices [K] into T x P, LongTensor [T] ``k_t`` with
        ``K = sum k_t``, and the frame softmax ``q`` [T].
    Raises:
        ValueError: if D = 1 or a frame's count exceeds P (the release fails there).
    """
    num_frames, tokens_per_frame, _ = frames.shape
    video_sim, frame_sim = official_similarities(frames)
    counts, q = official_frame_counts(video_sim, ratio, tokens_per_frame)
    if int(counts.max()) > tokens_per_frame:
        raise ValueError(f"vidcom2 official: a frame count {int(counts.max())} exceeds P = {tokens_per_frame} "
                         f"({frames.dtype} rounding of scale * P); the released code fails here too")
    scores = video_sim + frame_sim  # [T, P], smaller = more distinct
    kept = []
    for t, count in enumerate(counts.tolist()):
        local = torch.topk(scores[t], k=count, largest=False, sorted=False).indices
        kept.append(local.sort().values + t * tokens_per_frame)
    return torch.cat(kept), counts, q


def official_select(frames: torch.Tensor, ratio: float) -> Selection:
    """``variant="official"`` on ``frames`` [T, P, D]: :func:`official_keep`, with frame weights [T]
    the float32 of the release's ``(1 + q - mean q) / T``."""
    num_frames, tokens_per_frame, _ = frames.shape
    keep, counts, q = official_keep(frames, ratio)
    q = q.float()
    density = (1 + q - q.mean()) / num_frames
    logger.debug("vidcom2 official: T=%d P=%d r=%.4g %s -> K=%d", num_frames, tokens_per_frame, ratio,
                 frames.dtype, keep.numel())
    return selection_from_positions(keep, num_frames, tokens_per_frame, frame_weights=density)
