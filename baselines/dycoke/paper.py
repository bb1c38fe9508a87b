"""DyCoke ``variant="paper"``: TTM as the paper reads, float32 cosines, decimal counts, odd T reduced.

Also DyCoke's own kept count (:func:`dycoke_kept_count`), which is not ``floor(r * T * P)``.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.selection import Selection
from vcast.temporal import cosine

logger = logging.getLogger(__name__)


def reduced_frame_keep(ratio: float, tokens_per_frame: int, k: float | None = None) -> int:
    """``n = floor((1 - K) * P)`` on decimal values; ``K = 1 - ratio`` when ``k`` is None."""
    keep_share = Fraction(repr(float(ratio))) if k is None else 1 - Fraction(repr(float(k)))
    return math.floor(keep_share * tokens_per_frame)


def reference_frames(num_frames: int) -> torch.Tensor:
    """For each frame, the frame it is reduced against, or -1 if it is kept whole: LongTensor [T]."""
    t = torch.arange(num_frames)
    ref = torch.full((num_frames,), -1, dtype=torch.long)
    odd = t % 2 == 1
    ref[odd] = t[odd] - 1  # second frame of a pair, against the pair's first
    quad = (t % 4 == 2) & (t < num_frames - 2)  # i + 2 for i = 0, 4, ... < T - 4
    ref[quad] = t[quad] - 2
    if num_frames > 1 and num_frames % 2 == 1:
        ref[-1] = num_frames - 2  # odd T: the unpaired last frame, against its predecessor
    return ref


def dycoke_kept_count(num_frames: int, tokens_per_frame: int, keep_per_frame: int) -> int:
    """DyCoke's own total: ``A * P + (T - A) * n`` with ``A`` the whole (anchor) frames."""
    anchors = int((reference_frames(num_frames) < 0).sum())
    return anchors * tokens_per_frame + (num_frames - anchors) * keep_per_frame


def paper_select(frames: torch.Tensor, ratio: float, k: float | None) -> Selection:
    """DyCoke TTM on ``frames`` [T, P, D] (float32 cosines): anchor frames whole, the others keep
    ``n`` tokens; ``A * P + (T - A) * n`` kept positions (:func:`dycoke_kept_count`)."""
    num_frames, tokens_per_frame, _ = frames.shape
    device = frames.device
    keep_n = reduced_frame_keep(ratio, tokens_per_frame, k)

    ref = reference_frames(num_frames)
    whole = torch.nonzero(ref < 0).flatten()
    reduced = torch.nonzero(ref >= 0).flatten()
    token_index = torch.arange(tokens_per_frame, device=device)
    pieces = [(whole.to(device)[:, None] * tokens_per_frame + token_index).flatten()]

    if reduced.numel() and keep_n > 0:
        x = frames.float()
        sims = cosine(x[reduced.to(device)], x[ref[reduced].to(device)])  # [R, P]
        # Least similar first; stable, so equal cosines go to the lower token index.
        lowest = torch.sort(sims, dim=1, stable=True).indices[:, :keep_n]  # [R, n]
        pieces.append((reduced.to(device)[:, None] * tokens_per_frame + lowest).flatten())

    positions = torch.cat(pieces)
    logger.debug("dycoke: T=%d P=%d n=%d anchors=%d -> %d tokens", num_frames, tokens_per_frame,
                 keep_n, whole.numel(), positions.numel())
    return selection_from_positions(positions, num_frames, tokens_per_frame)

