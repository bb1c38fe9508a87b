"""Turn a baseline's chosen positions (and merged tokens) into a :class:`vcast.Selection`."""

from __future__ import annotations

from typing import Optional

import torch

from vcast.selection import Selection


def selection_from_positions(positions: torch.Tensor, num_frames: int, tokens_per_frame: int,
                             tokens: Optional[torch.Tensor] = None,
                             frame_weights: Optional[torch.Tensor] = None) -> Selection:
    """Sort ``positions`` [K] (flat indices into ``T * P``, any order) ascending, carry ``tokens``
    [K, D] along (merging methods; None for pruning) and count the budgets per frame.

    Raises:
        ValueError: if two outputs claim the same position (a merging method must give each
            output token its own on-grid place) or a position is out of range.
    """
    positions = positions.reshape(-1).long()
    total = num_frames * tokens_per_frame
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= total):
        raise ValueError(f"positions must lie in [0, {total}), got range "
                         f"[{int(positions.min())}, {int(positions.max())}]")
    order = torch.sort(positions, stable=True).indices
    keep = positions.index_select(0, order)
    if keep.numel() > 1 and bool((keep[1:] == keep[:-1]).any()):
        raise ValueError("two output tokens take the same position; each needs its own place on the grid")
    budgets = torch.bincount(torch.div(keep, tokens_per_frame, rounding_mode="floor"), minlength=num_frames)
    merged = None if tokens is None else tokens.index_select(0, order.to(tokens.device))
    return Selection(keep=keep, budgets=budgets, tokens_per_frame=tokens_per_frame,
                     frame_weights=frame_weights, tokens=merged)
