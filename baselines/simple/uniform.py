"""Uniform: the same budget for every frame, and evenly spaced tokens inside each frame.

Definition.
* Budget: ``B = floor(r * T * P)`` (``vcast.budget.paper_total_budget``, ``k_min = 0``),
  apportioned over the frames with equal weights by ``vcast.allocation.allocate_paper``
  (``k_min = 0``): every frame gets ``floor(B / T)`` and, since all remainders tie, the
  ``B mod T`` leftover tokens go to the earliest frames. Budgets differ by at most 1.
* Inside frame ``t`` with budget ``b``: the tokens at raster indices
  ``floor((j + 1/2) * P / b)`` for ``j = 0 .. b-1`` (the centres of ``b`` equal slices of the
  frame's raster order; computed exactly in integers as ``((2j + 1) P) // (2b)``). They are
  distinct because consecutive values are at least ``P / b >= 1`` apart.
Pure pruning: kept tokens keep their own (t, h, w) position. Deterministic, no model inputs.
"""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.allocation import allocate_paper
from vcast.budget import paper_total_budget
from vcast.selection import Selection

logger = logging.getLogger(__name__)


def evenly_spaced(budgets: torch.Tensor, tokens_per_frame: int) -> torch.Tensor:
    """Flat indices of ``budgets[t]`` evenly spaced tokens in each frame: ``[T] -> [sum(b)]``."""
    num_frames = budgets.numel()
    j = torch.arange(tokens_per_frame, device=budgets.device)[None, :]  # [1, P]; b_t <= P
    b = budgets[:, None]  # [T, 1]
    inside = j < b  # [T, P]
    index = ((2 * j + 1) * tokens_per_frame) // (2 * b).clamp_min(1)  # [T, P], exact integers
    frame = torch.arange(num_frames, device=budgets.device)[:, None]
    return (frame * tokens_per_frame + index)[inside]


def uniform_keep(frames: torch.Tensor, ratio: float) -> Selection:
    """``floor(r T P)`` tokens of ``frames`` [T, P, D], spread evenly over frames and inside each.

    Returns:
        Selection with ``keep`` [B], ``budgets`` [T] and the (uniform) frame weights [T].
    """
    num_frames, tokens_per_frame, _ = frames.shape
    budget = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)
    weights = torch.full((num_frames,), 1.0 / num_frames, dtype=torch.float32, device=frames.device)
    budgets = allocate_paper(weights, budget, tokens_per_frame, 0)
    positions = evenly_spaced(budgets, tokens_per_frame)
    logger.debug("uniform: keeping %d of %d tokens", budget, num_frames * tokens_per_frame)
    return selection_from_positions(positions, num_frames, tokens_per_frame, frame_weights=weights)
