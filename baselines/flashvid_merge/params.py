"""FlashVID's parameters as both registrations (``flashvid_merge`` and ``flashvid``) read them:
the vision side's checks and counts on a parameter's decimal value as written."""

from __future__ import annotations

import math
from fractions import Fraction

from vcast.validation import check_choice, check_int, check_positive, check_range

SELECTIONS = ("attn_div", "attn_div_v2")


def ceil_share(count: int, share: float) -> int:
    """``ceil(count * share)`` on the decimal value of ``share`` as written (no float artefacts)."""
    return math.ceil(count * Fraction(repr(float(share))))


def check_merge_params(selection: str, alpha: float, expansion: float, segment_threshold: float,
                       min_segment_num: int, temporal_threshold: float) -> None:
    """ValueError naming a bad vision-side parameter."""
    check_choice("selection", selection, SELECTIONS)
    check_range("alpha", alpha, 0.0, 1.0)
    check_positive("expansion", expansion)
    check_range("segment_threshold", segment_threshold, -1.0, 1.0)
    check_int("min_segment_num", min_segment_num, 1)
    check_range("temporal_threshold", temporal_threshold, -1.0, 1.0)
