"""First (2x2): keep the top-left token of every 2x2 cell of each frame's token grid.

Paper: the "First (2x2)" row of tab:rope in "V-CAST: Video Curvature-Aware Spatio-Temporal
Pruning for Efficient Video Large Language Models" (NeurIPS 2026 preprint), a naive pruning
reference against merging. There is no official code (reference_methods.md section 1, "not
present in any of these repos"); this file is the definition.

Definition. Each frame's ``P`` tokens lie on the ``(h, w)`` grid (raster order) given by the
model input ``grid`` (the adapters supply the LLM token grid of one frame; if it is None and
``P`` is a perfect square a square grid is assumed). The grid is cut into 2x2 cells from the
top-left; at an odd last row / column the cells are 1x2, 2x1 or 1x1 (``baselines.grid_cells``).
Every cell keeps its top-left token, i.e. tokens ``(2a, 2b)``. Pure pruning: kept tokens keep
their own (t, h, w) position.

Budget. The method defines its own count: ``ceil(h / 2) * ceil(w / 2)`` tokens per frame,
``T`` times that in all. That is exactly ``P / 4`` for even grids and slightly more for odd ones
(a 3x5 grid keeps 6 of 15). The only accepted ratio is the nominal 0.25; any other raises
ValueError naming ``ratio`` (the sweep config pins ``fixed_ratio: 0.25``).

Hyper-parameters: none. Deterministic, no tie-breaks needed.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from baselines.grid_cells import flat_positions, frame_cells
from baselines.common.selection_output import selection_from_positions
from vcast.registry import register_method
from vcast.selection import Selection

logger = logging.getLogger(__name__)


@register_method("first_2x2", inputs=("grid",))
def first_2x2_select(frames: torch.Tensor, ratio: float, *, grid: Any | None = None) -> Selection:
    """Keep the top-left token of every 2x2 cell of every frame.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: must be 0.25 (the method fixes its own count, see the module docstring).
        grid: model input ``(h, w)`` with ``h * w == P``, or None for a square grid.
    Returns:
        Selection with ``T * ceil(h/2) * ceil(w/2)`` kept tokens.
    """
    num_frames, tokens_per_frame, _ = frames.shape
    layout = frame_cells("first_2x2", frames, ratio, grid)
    per_frame = layout.top_left[None, :].expand(num_frames, -1)  # [T, C]
    logger.debug("first_2x2: grid %s, %d cells per frame", layout.grid, layout.num_cells)
    return selection_from_positions(flat_positions(per_frame, tokens_per_frame), num_frames, tokens_per_frame)
