"""The 2x2-cell references: keep one token of every 2x2 cell (``first_2x2``, ``random_2x2``) or
merge the cell into its mean (``avgpool_2x2``).

Each frame's ``P`` tokens lie on the ``(h, w)`` grid (raster order) given by the model input
``grid`` (the adapters supply the LLM token grid of one frame; if it is None and ``P`` is a
perfect square a square grid is assumed). The grid is cut into 2x2 cells from the top-left; at an
odd last row / column the cells are 1x2, 2x1 or 1x1 (:mod:`baselines.simple.grid_cells`).

* ``first_2x2``: every cell keeps its top-left token, i.e. tokens ``(2a, 2b)``. Pure pruning:
  kept tokens keep their own (t, h, w) position. Deterministic, no tie-breaks needed.
* ``random_2x2``: every cell of every frame independently keeps one of its members, uniformly at
  random. Pure pruning. Randomness: one draw ``k ~ U{0, 1, 2, 3}`` per (frame, cell) from
  ``torch.Generator().manual_seed(seed)`` on the CPU (the same choice on every device); the cell
  keeps its member number ``k mod n`` (members in raster order), which is exactly uniform
  because a cell's size ``n`` is 1, 2 or 4, all divisors of 4.
* ``avgpool_2x2``: a cell at an odd last row / column averages only the tokens it has (no zero
  padding). The output token of a cell is the plain float32 mean of its members, computed as a
  fixed-order sum over the members (deterministic on every device; no atomics).

  Position of merged tokens. The merged token is placed at the cell's top-left token
  ``(t, 2a, 2b)``. For Qwen3-VL that is an on-grid MRoPE (t, h, w) coordinate of one of its
  sources (the coordinate the pruning variant ``first_2x2`` keeps), not the cell's centre
  (which would be off-grid at ``(2a + 0.5, 2b + 0.5)``).

Budget. The methods define their own count: ``ceil(h / 2) * ceil(w / 2)`` tokens per frame,
``T`` times that in all. That is exactly ``P / 4`` for even grids and slightly more for odd ones
(a 3x5 grid keeps 6 of 15). The only accepted ratio is the nominal 0.25 (checked by
:func:`baselines.simple.grid_cells.frame_cells` before these run; the sweep configs pin
``fixed_ratio: 0.25``).
"""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from baselines.simple.grid_cells import CELL_SIZE, CellLayout, flat_positions
from vcast.selection import Selection

logger = logging.getLogger(__name__)


def first_2x2_keep(frames: torch.Tensor, layout: CellLayout) -> Selection:
    """The top-left token of every cell of ``layout`` in every frame of ``frames`` [T, P, D].

    Returns:
        Selection with ``T * C`` kept tokens (``C`` cells per frame).
    """
    num_frames, tokens_per_frame, _ = frames.shape
    per_frame = layout.top_left[None, :].expand(num_frames, -1)  # [T, C]
    logger.debug("first_2x2: grid %s, %d cells per frame", layout.grid, layout.num_cells)
    return selection_from_positions(flat_positions(per_frame, tokens_per_frame), num_frames, tokens_per_frame)


def random_2x2_keep(frames: torch.Tensor, layout: CellLayout, seed: int) -> Selection:
    """One uniformly random member (CPU generator seeded with ``seed``) of every cell of
    ``layout`` in every frame of ``frames`` [T, P, D].

    Returns:
        Selection with ``T * C`` kept tokens (``C`` cells per frame).
    """
    num_frames, tokens_per_frame, _ = frames.shape
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randint(0, CELL_SIZE, (num_frames, layout.num_cells), generator=generator).to(frames.device)
    slot = draws % layout.counts[None, :]  # [T, C], uniform over the cell's members (n divides 4)
    cells = torch.arange(layout.num_cells, device=frames.device)
    per_frame = layout.members[cells[None, :], slot]  # [T, C]
    logger.debug("random_2x2: grid %s, %d cells per frame, seed %d", layout.grid, layout.num_cells, seed)
    return selection_from_positions(flat_positions(per_frame, tokens_per_frame), num_frames, tokens_per_frame)


def avgpool_2x2_merge(frames: torch.Tensor, layout: CellLayout) -> Selection:
    """The float32 mean of every cell of ``layout`` in every frame of ``frames`` [T, P, D], placed
    at the cell's top-left token.

    Returns:
        Selection with ``K = T * C`` positions and ``tokens`` [K, D] float32.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    valid = layout.members >= 0  # [C, 4]
    gathered = frames.float()[:, layout.members.clamp_min(0), :]  # [T, C, 4, D]
    gathered = gathered * valid[None, :, :, None]  # padding slots contribute 0 (frames are finite)
    means = gathered.sum(dim=2) / layout.counts[None, :, None].float()  # [T, C, D]
    per_frame = layout.top_left[None, :].expand(num_frames, -1)  # [T, C]
    logger.debug("avgpool_2x2: grid %s, %d cells per frame", layout.grid, layout.num_cells)
    return selection_from_positions(flat_positions(per_frame, tokens_per_frame), num_frames, tokens_per_frame,
                                    tokens=means.reshape(-1, dim))
