"""Random: a seeded, uniformly random subset of exactly ``B = floor(r T P)`` video tokens.

Definition. ``B = floor(r * T * P)`` (``vcast.budget.paper_total_budget`` with ``k_min = 0``,
so ``B`` may be 0 for a tiny video at a small ratio) tokens are drawn uniformly without
replacement from all ``T * P`` video tokens at once, not frame by frame, so the per-frame
counts are random (hypergeometric) too. The draw is ``torch.randperm(T * P)[:B]`` from
``torch.Generator().manual_seed(seed)`` on the CPU, so the same seed keeps the same tokens on
every device and in every dtype. Pure pruning: kept tokens keep their own (t, h, w) position.
No model inputs.
"""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.budget import paper_total_budget
from vcast.selection import Selection

logger = logging.getLogger(__name__)


def random_keep(frames: torch.Tensor, ratio: float, seed: int) -> Selection:
    """``floor(r T P)`` tokens of ``frames`` [T, P, D] drawn by a CPU generator seeded with ``seed``.

    Returns:
        Selection with ``keep`` [B] and ``budgets`` [T].
    """
    num_frames, tokens_per_frame, _ = frames.shape
    budget = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)
    generator = torch.Generator().manual_seed(seed)
    positions = torch.randperm(num_frames * tokens_per_frame, generator=generator)[:budget]
    logger.debug("random: keeping %d of %d tokens, seed %d", budget, num_frames * tokens_per_frame, seed)
    return selection_from_positions(positions.to(frames.device), num_frames, tokens_per_frame)
