"""Random (2x2): keep one seeded, uniformly random token of every 2x2 cell of each frame.

Paper: the "Random (2x2)" row of tab:rope in "V-CAST: Video Curvature-Aware Spatio-Temporal
Pruning for Efficient Video Large Language Models" (NeurIPS 2026 preprint), a naive pruning
reference against merging. There is no official code (reference_methods.md section 1, "not
present in any of these repos"); this file is the definition.

Definition. Each frame's ``P`` tokens lie on the ``(h, w)`` grid (raster order) given by the
model input ``grid`` (the adapters supply the LLM token grid of one frame; if it is None and
``P`` is a perfect square a square grid is assumed). The grid is cut into 2x2 cells from the
top-left; at an odd last row / column the cells are 1x2, 2x1 or 1x1 (``baselines.grid_cells``).
Every cell of every frame independently keeps one of its members, uniformly at random. Pure
pruning: kept tokens keep their own (t, h, w) position.

Randomness. One draw ``k ~ U{0, 1, 2, 3}`` per (frame, cell) from
``torch.Generator().manual_seed(seed)`` on the CPU (the same choice on every device); the cell
keeps its member number ``k mod n`` (members in raster order), which is exactly uniform
because a cell's size ``n`` is 1, 2 or 4, all divisors of 4.

Budget. The method defines its own count: ``ceil(h / 2) * ceil(w / 2)`` tokens per frame,
``T`` times that in all (exactly ``P / 4`` for even grids, slightly more for odd ones). The only
accepted ratio is the nominal 0.25; any other raises ValueError naming ``ratio`` (the sweep
config pins ``fixed_ratio: 0.25``).

Hyper-parameters: ``seed = 0``.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from baselines.grid_cells import CELL_SIZE, flat_positions, frame_cells
from baselines.common.selection_output import selection_from_positions
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int

logger = logging.getLogger(__name__)

MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range


@register_method("random_2x2", inputs=("grid",))
def random_2x2_select(frames: torch.Tensor, ratio: float, *, seed: int = 0, grid: Any | None = None) -> Selection:
    """Keep one uniformly random member of every 2x2 cell of every frame.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: must be 0.25 (the method fixes its own count, see the module docstring).
        seed: seed of the CPU generator (>= 0).
        grid: model input ``(h, w)`` with ``h * w == P``, or None for a square grid.
    Returns:
        Selection with ``T * ceil(h/2) * ceil(w/2)`` kept tokens.
    """
    layout = frame_cells("random_2x2", frames, ratio, grid)
    seed = check_int("seed", seed, 0, MAX_SEED)
    num_frames, tokens_per_frame, _ = frames.shape
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randint(0, CELL_SIZE, (num_frames, layout.num_cells), generator=generator).to(frames.device)
    slot = draws % layout.counts[None, :]  # [T, C], uniform over the cell's members (n divides 4)
    cells = torch.arange(layout.num_cells, device=frames.device)
    per_frame = layout.members[cells[None, :], slot]  # [T, C]
    logger.debug("random_2x2: grid %s, %d cells per frame, seed %d", layout.grid, layout.num_cells, seed)
    return selection_from_positions(flat_positions(per_frame, tokens_per_frame), num_frames, tokens_per_frame)
