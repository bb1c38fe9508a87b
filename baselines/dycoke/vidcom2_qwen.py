"""DyCoke ``variant="vidcom2_qwen"``: the VidCom2 ``qwen``-branch port of TTM (xuyang-liu16/VidCom2@a85d485).

The port's count (``DYCOKE_K`` defaulting to ``1 - R_RATIO``, with its clamps) and its kept set
deduplicated and sorted; the arithmetic is :func:`baselines.dycoke.release_ttm.release_order`.
"""

from __future__ import annotations

import torch

from baselines.common.selection_output import selection_from_positions
from baselines.dycoke.release_ttm import release_order
from vcast.selection import Selection


def vidcom2_qwen_keep_count(ratio: float, tokens_per_frame: int, k: float | None = None) -> int:
    """The VidCom2 ``qwen`` port's count, in binary floats with its clamps.

    ``DYCOKE_K`` (our ``k``) defaults to ``1 - R_RATIO``; the port keeps ``1 - DYCOKE_K`` of a
    reduced frame, truncated: r = 0.1, P = 10 gives ``int((1 - 0.9) * 10) = 0``.
    """
    retention = float(max(0.0, min(1.0, ratio)))
    merging = 1.0 - retention if k is None else float(k)
    merging = float(max(0.0, min(1.0, merging)))
    keep_share = min(max(1.0 - merging, 0.0), 1.0)
    return int(keep_share * tokens_per_frame)


def vidcom2_qwen_select(frames: torch.Tensor, ratio: float, k: float | None) -> Selection:
    """VidCom2 ``qwen`` port on ``frames`` [T, P, D]: the release's kept set, deduplicated and
    sorted (positions kept)."""
    num_frames, tokens_per_frame, _ = frames.shape
    order = release_order(frames, vidcom2_qwen_keep_count(ratio, tokens_per_frame, k))
    keep = torch.unique(order, sorted=True)
    if keep.numel() == 0:  # the port's fallback; unreachable for P >= 1 (frame 0 stays whole)
        keep = torch.zeros(1, dtype=torch.long, device=frames.device)
    return selection_from_positions(keep, num_frames, tokens_per_frame)
