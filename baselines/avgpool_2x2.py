"""AvgPool (2x2): merge every 2x2 cell of each frame's token grid into its mean.

Paper: the "AvgPool (2x2)" row of tab:rope in "V-CAST: Video Curvature-Aware Spatio-Temporal
Pruning for Efficient Video Large Language Models" (NeurIPS 2026 preprint), the naive merging
reference that the paper contrasts with on-grid pruning. There is no official code
(reference_methods.md section 1, "not present in any of these repos"); this file is the
definition.

Definition. Each frame's ``P`` tokens lie on the ``(h, w)`` grid (raster order) given by the
model input ``grid`` (the adapters supply the LLM token grid of one frame; if it is None and
``P`` is a perfect square a square grid is assumed). The grid is cut into 2x2 cells from the
top-left; at an odd last row / column the cells are 1x2, 2x1 or 1x1 (``baselines.grid_cells``),
and such a cell averages only the tokens it has (no zero padding). The output token of a cell
is the plain float32 mean of its members, computed as a fixed-order sum over the members
(deterministic on every device; no atomics).

Position of merged tokens. The merged token is placed at the cell's top-left token
``(t, 2a, 2b)``. For Qwen3-VL that is an on-grid MRoPE (t, h, w) coordinate of one of its
sources (the coordinate the pruning variant ``first_2x2`` keeps), not the cell's centre
(which would be off-grid at ``(2a + 0.5, 2b + 0.5)``).

Budget. The method defines its own count: ``ceil(h / 2) * ceil(w / 2)`` tokens per frame,
``T`` times that in all (exactly ``P / 4`` for even grids, slightly more for odd ones). The only
accepted ratio is the nominal 0.25; any other raises ValueError naming ``ratio`` (the sweep
config pins ``fixed_ratio: 0.25``).

Hyper-parameters: none.
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


@register_method("avgpool_2x2", inputs=("grid",))
def avgpool_2x2_select(frames: torch.Tensor, ratio: float, *, grid: Any | None = None) -> Selection:
    """Average every 2x2 cell of every frame into one token at the cell's top-left position.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: must be 0.25 (the method fixes its own count, see the module docstring).
        grid: model input ``(h, w)`` with ``h * w == P``, or None for a square grid.
    Returns:
        Selection with ``K = T * ceil(h/2) * ceil(w/2)`` positions and ``tokens`` [K, D] float32.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    layout = frame_cells("avgpool_2x2", frames, ratio, grid)
    valid = layout.members >= 0  # [C, 4]
    gathered = frames.float()[:, layout.members.clamp_min(0), :]  # [T, C, 4, D]
    gathered = gathered * valid[None, :, :, None]  # padding slots contribute 0 (frames are finite)
    means = gathered.sum(dim=2) / layout.counts[None, :, None].float()  # [T, C, D]
    per_frame = layout.top_left[None, :].expand(num_frames, -1)  # [T, C]
    logger.debug("avgpool_2x2: grid %s, %d cells per frame", layout.grid, layout.num_cells)
    return selection_from_positions(flat_positions(per_frame, tokens_per_frame), num_frames, tokens_per_frame,
                                    tokens=means.reshape(-1, dim))
