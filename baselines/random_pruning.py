"""Random: keep a seeded, uniformly random subset of exactly ``B = floor(r T P)`` video tokens.

Paper: the "Random" row of tab:efficiency_comparison in "V-CAST: Video Curvature-Aware
Spatio-Temporal Pruning for Efficient Video Large Language Models" (NeurIPS 2026 preprint), the
cost floor of a pruning method (no scoring at all). There is no official code
(reference_methods.md section 1, "random pruning ... not present in any of these repos"); this
file is the definition.

Definition. ``B = floor(r * T * P)`` (``vcast.budget.paper_total_budget`` with ``k_min = 0``,
so ``B`` may be 0 for a tiny video at a small ratio) tokens are drawn uniformly without
replacement from all ``T * P`` video tokens at once, not frame by frame, so the per-frame
counts are random (hypergeometric) too. The draw is ``torch.randperm(T * P)[:B]`` from
``torch.Generator().manual_seed(seed)`` on the CPU, so the same seed keeps the same tokens on
every device and in every dtype. Pure pruning: kept tokens keep their own (t, h, w) position.
No model inputs.

Hyper-parameters: ``seed = 0`` at every ratio.
"""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.budget import paper_total_budget
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int

logger = logging.getLogger(__name__)

MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range


@register_method("random")
def random_select(frames: torch.Tensor, ratio: float, *, seed: int = 0) -> Selection:
    """Keep ``floor(r T P)`` tokens of ``frames`` [T, P, D] chosen uniformly at random.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`); only the shape is used.
        ratio: retention ratio r in (0, 1].
        seed: seed of the CPU generator (>= 0).
    Returns:
        Selection with ``keep`` [B] and ``budgets`` [T].
    """
    seed = check_int("seed", seed, 0, MAX_SEED)
    num_frames, tokens_per_frame, _ = frames.shape
    budget = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)
    generator = torch.Generator().manual_seed(seed)
    positions = torch.randperm(num_frames * tokens_per_frame, generator=generator)[:budget]
    logger.debug("random: keeping %d of %d tokens, seed %d", budget, num_frames * tokens_per_frame, seed)
    return selection_from_positions(positions.to(frames.device), num_frames, tokens_per_frame)
