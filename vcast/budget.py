"""Total token budget B of one video, as the paper and as the released code compute it."""

from __future__ import annotations

import math
from fractions import Fraction


def paper_total_budget(ratio: float, num_frames: int, tokens_per_frame: int, k_min: int) -> int:
    """``B = floor(r * T * P)``, raised to ``T * k_min`` (paper, Algorithm 1).

    The floor is taken on the decimal value of ``ratio`` as written (its shortest repr), so
    ``r = 0.29, T * P = 100`` gives 29 rather than the 28 that binary rounding of
    ``0.29 * 100 = 28.999...`` would give.
    """
    total = num_frames * tokens_per_frame
    budget = math.floor(Fraction(repr(float(ratio))) * total)
    return max(budget, num_frames * k_min)


def official_total_budget(ratio: float, num_frames: int, tokens_per_frame: int, k_min: int) -> int:
    """The released code's budget: Python ``round(r * T * P)`` (half to even) on floats,
    clipped to ``[1, T * P]``, then raised to ``T * k_min`` when ``k_min > 0``."""
    total = num_frames * tokens_per_frame
    budget = min(max(round(total * ratio), 1), total)
    if k_min > 0:
        budget = max(budget, num_frames * k_min)
    return budget
