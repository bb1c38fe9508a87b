"""DyCoke ``variant="official"``: KD-TAO/DyCoke@dd74634 ``dycole_ttm``, with its rows in the release's order.

The count ``int((1 - K) * P)`` in binary floats and the release's default K; the arithmetic is
:func:`baselines.dycoke.release_ttm.release_order`.
"""

from __future__ import annotations

import torch

from baselines.common.selection_output import selection_from_positions
from baselines.dycoke.release_ttm import release_order
from vcast.selection import Selection

# lmms-eval ``llava_onevision.py`` default ``dycoke_k`` of the release (overrides builder.py's 0.3).
OFFICIAL_K = 0.7


def official_keep_count(k: float, tokens_per_frame: int) -> int:
    """The release's ``int((1 - K) * P)`` in binary floats (K = 0.7, P = 196 -> 58)."""
    return int((1 - k) * tokens_per_frame)


def official_select(frames: torch.Tensor, k: float) -> Selection:
    """KD-TAO/DyCoke ``dycole_ttm`` on ``frames`` [T, P, D]: the kept set, and its rows [K, D] in
    the release's order as ``tokens``."""
    num_frames, tokens_per_frame, dim = frames.shape
    order = release_order(frames, official_keep_count(k, tokens_per_frame))
    # Frames come out in frame order, so the k-th output row takes the k-th kept slot ascending.
    slots = torch.sort(order).values
    rows = frames.reshape(num_frames * tokens_per_frame, dim).index_select(0, order)
    return selection_from_positions(slots, num_frames, tokens_per_frame, tokens=rows)
