"""Input methods: the same token budget spent on what the model is given, not on pruning.

A reviewer's first question to a token-pruning paper is whether the model would do as well with
fewer frames, or with smaller frames, at the same number of video tokens. An input method answers
it: it prunes nothing; the lmms-eval plugins sample fewer frames or resize them before the
processor, and the unpruned model runs on that.

The budget is matched from below, so an input method never gets more tokens than a pruning
method at the same ratio ``r``:

* frames: ``floor(r F)`` of the ``F`` frames the unpruned model reads, rounded down to a whole
  temporal patch (Qwen3-VL: 2 frames), at least one patch; sampled over the whole video as the
  plugin samples ``F`` (``linspace`` over the video), at the unpruned per-frame resolution;
* grid: each side of a frame's LLM token grid ``(h, w)`` scaled by ``sqrt(r)`` and floored, at
  least 1: ``(floor(h sqrt r), floor(w sqrt r))``, so ``h' w' <= r h w`` and the aspect ratio holds.

``r`` is read as the decimal it is written as (``0.15``, not its binary neighbour), as in
:func:`vcast.budget.paper_total_budget`. The plugins record, per video, the frames and grid used
and those of the unpruned model, and count ``video_tokens_total`` as the unpruned model's tokens,
so ``Kept %`` is the share really spent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from vcast.validation import check_int, check_ratio


def _decimal(ratio: float) -> Fraction:
    return Fraction(repr(float(ratio)))


@dataclass(frozen=True)
class InputPlan:
    """How an input method spends retention ``ratio``: ``frame_share`` of the frames and
    ``grid_share`` of each frame's token grid (1.0 leaves that dimension alone)."""

    method: str
    ratio: float
    frame_share: float = 1.0
    grid_share: float = 1.0

    def __post_init__(self) -> None:
        check_ratio(self.frame_share)
        check_ratio(self.grid_share)

    def frames(self, reference: int, temporal_patch: int = 1) -> int:
        """Frames to read where the unpruned model reads ``reference`` (a multiple of
        ``temporal_patch``): ``floor(share * reference)`` rounded down to whole patches, >= 1 patch."""
        check_int("reference", reference, 1)
        check_int("temporal_patch", temporal_patch, 1)
        if self.frame_share == 1.0:
            return reference
        patches = math.floor(_decimal(self.frame_share) * reference) // temporal_patch
        return max(1, patches) * temporal_patch

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """The LLM token grid ``(h', w')`` of a frame whose unpruned grid is ``(height, width)``:
        each side times ``sqrt(share)``, floored exactly, >= 1."""
        check_int("height", height, 1)
        check_int("width", width, 1)
        share = _decimal(self.grid_share)
        # floor(s * sqrt(share)) == isqrt(floor(s^2 * share)), exactly, for s, share >= 0
        return (max(1, math.isqrt(math.floor(share * height * height))),
                max(1, math.isqrt(math.floor(share * width * width))))
