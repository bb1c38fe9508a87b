"""2x2 cells of a frame's token grid, shared by ``first_2x2``, ``random_2x2`` and ``avgpool_2x2``.

Registers nothing. A frame's ``P`` tokens lie on an ``(h, w)`` grid in raster order (token
``i`` is at row ``i // w``, column ``i % w``). Cell ``(a, b)`` holds the tokens at rows
``2a, 2a+1`` and columns ``2b, 2b+1`` that exist, so a grid with an odd height or width has
1x2, 2x1 or 1x1 cells along its last row / column. Cells are numbered in raster order,
``c = a * ceil(w / 2) + b``, so there are ``ceil(h / 2) * ceil(w / 2)`` of them.

All maps are built once per call with tensor ops (no loop over tokens).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import torch

CELL_RATIO = 0.25  # the nominal retention of "one token per 2x2 cell"
CELL_SIZE = 4  # tokens in a full cell (members tables are padded to this width)


@dataclass(frozen=True)
class CellLayout:
    """The 2x2 cells of one ``(h, w)`` grid.

    Attributes:
        grid: ``(h, w)``.
        cell_of: LongTensor ``[P]``, the cell of each token.
        members: LongTensor ``[C, 4]``, the tokens of each cell in ascending (raster) order,
            padded with ``-1``; ``members[:, 0]`` is the cell's top-left token.
        counts: LongTensor ``[C]``, tokens per cell (1, 2 or 4).
    """

    grid: tuple[int, int]
    cell_of: torch.Tensor
    members: torch.Tensor
    counts: torch.Tensor

    @property
    def num_cells(self) -> int:
        """``C = ceil(h / 2) * ceil(w / 2)``."""
        return int(self.counts.numel())

    @property
    def top_left(self) -> torch.Tensor:
        """LongTensor ``[C]``: the top-left token of each cell (its lowest raster index)."""
        return self.members[:, 0]


def check_cell_ratio(method: str, ratio: float) -> None:
    """The 2x2 methods fix their own budget; any ratio other than 0.25 is a configuration error."""
    if ratio != CELL_RATIO:
        raise ValueError(f"{method} keeps one token per 2x2 cell, i.e. ratio {CELL_RATIO}; got ratio={ratio!r}")


def resolve_grid(method: str, grid: Any | None, tokens_per_frame: int) -> tuple[int, int]:
    """``(h, w)`` with ``h * w == P``: the model input ``grid``, or a square grid when it is None.

    Raises:
        ValueError: naming ``grid`` if it is None and ``P`` is not a perfect square, is not a
            pair of positive integers, or does not multiply to ``P``.
    """
    if grid is None:
        side = math.isqrt(tokens_per_frame)
        if side * side != tokens_per_frame:
            raise ValueError(f"{method} needs grid (h, w), the token grid of one frame: P = {tokens_per_frame} "
                             "tokens per frame is not a perfect square, so the grid cannot be inferred")
        return side, side
    try:
        values = tuple(grid)
        if len(values) != 2 or any(isinstance(v, bool) for v in values):
            raise TypeError
        h, w = (operator.index(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"{method} needs grid as a pair of integers (h, w), got {grid!r}") from None
    if h < 1 or w < 1:
        raise ValueError(f"{method} needs grid (h, w) with h, w >= 1, got {grid!r}")
    if h * w != tokens_per_frame:
        raise ValueError(f"{method}: grid ({h}, {w}) has h * w = {h * w} tokens, but frames has P = "
                         f"{tokens_per_frame} tokens per frame")
    return h, w


def cell_layout(grid: tuple[int, int], device: torch.device) -> CellLayout:
    """The cells of ``grid`` = ``(h, w)`` on ``device`` (see the module docstring)."""
    h, w = grid
    cells_w = (w + 1) // 2
    rows = torch.arange(h, device=device)
    cols = torch.arange(w, device=device)
    cell_of = ((rows // 2)[:, None] * cells_w + (cols // 2)[None, :]).reshape(-1)  # [P]
    num_cells = ((h + 1) // 2) * cells_w
    counts = torch.bincount(cell_of, minlength=num_cells)
    # Group the tokens by cell (stable, so ascending inside a cell), then each token's rank
    # inside its cell is its place in the group minus the group's start.
    order = torch.sort(cell_of, stable=True).indices
    starts = torch.cumsum(counts, 0) - counts
    sorted_cells = cell_of[order]
    rank = torch.arange(order.numel(), device=device) - starts[sorted_cells]
    members = torch.full((num_cells, CELL_SIZE), -1, dtype=torch.long, device=device)
    members[sorted_cells, rank] = order
    return CellLayout(grid=(h, w), cell_of=cell_of, members=members, counts=counts)


def frame_cells(method: str, frames: torch.Tensor, ratio: float, grid: Any | None) -> CellLayout:
    """The cells of ``frames``' [T, P, D] grid for a 2x2 method: checks ``ratio`` (0.25) and ``grid``
    (:func:`resolve_grid`), then lays the cells out on the frames' device."""
    check_cell_ratio(method, ratio)
    return cell_layout(resolve_grid(method, grid, frames.shape[1]), frames.device)


def flat_positions(per_frame: torch.Tensor, tokens_per_frame: int) -> torch.Tensor:
    """``[T, C]`` token indices inside each frame -> ``[T * C]`` flat indices ``t * P + i``."""
    offsets = torch.arange(per_frame.shape[0], device=per_frame.device)[:, None] * tokens_per_frame
    return (per_frame + offsets).reshape(-1)
