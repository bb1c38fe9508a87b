"""EVS's selection in its two variants: the ``paper`` definition and vLLM's deployed arithmetic.

Definition. For the ``[T, P, D]`` post-merger tokens of one video:

* ``d[t, p] = 1 - cos(x[t, p], x[t-1, p])`` for ``t >= 1`` (the same grid cell of the previous
  frame, ``torch.nn.functional.cosine_similarity``, eps 1e-8); the first frame scores ``+inf``
  (vLLM writes 255, above any dissimilarity, which is at most 2), so it is always kept whole;
* the ``B`` tokens with the largest ``d`` over the whole video are kept (a stable descending sort
  of the flat ``t * P + p`` scores, so ties keep the lower index); pure pruning, each kept token
  keeps its own (t, h, w) position.

Budget. At least one whole frame: ``B = max(P, floor(r T P))`` (``r`` read as the decimal it is
written as, :func:`vcast.budget.paper_total_budget`). vLLM's pruning rate is ``q = 1 - r``.

* ``paper``: cosines in float32 whatever the input dtype (bf16 input gives the same kept set as
  its float32 copy).
* ``official``: vLLM's code as deployed: cosines in the input dtype and vLLM's count
  ``max(P, int(T P (1 - q)))`` with ``q = 1 - r`` in floating point (``r = 0.15`` gives
  ``1 - 0.85 = 0.15000000000000002``, so the two counts can differ by one token).
"""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.budget import paper_total_budget
from vcast.selection import Selection
from vcast.variants import OFFICIAL, PAPER

logger = logging.getLogger(__name__)


def evs_budget(ratio: float, num_frames: int, tokens_per_frame: int, variant: str = PAPER) -> int:
    """Tokens EVS keeps of a ``[T, P]`` video at retention ``ratio``: at least one whole frame."""
    if variant == OFFICIAL:
        pruning_rate = 1.0 - ratio
        counted = int(num_frames * tokens_per_frame * (1.0 - pruning_rate))
    else:
        counted = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)
    return min(max(tokens_per_frame, counted), num_frames * tokens_per_frame)


def evs_dissimilarity(frames: torch.Tensor) -> torch.Tensor:
    """``1 - cos`` of each token with the same cell of the previous frame, ``+inf`` on frame 0.

    Args:
        frames: [T, P, D] tokens, in the dtype the cosines are computed in.
    Returns:
        [T, P] dissimilarities in that dtype.
    """
    first = torch.full_like(frames[:1, :, 0], float("inf"))
    if frames.shape[0] == 1:
        return first
    change = 1 - torch.nn.functional.cosine_similarity(frames[1:], frames[:-1], dim=-1)  # [T-1, P]
    return torch.cat([first, change], dim=0)


def paper_evs(frames: torch.Tensor, ratio: float) -> Selection:
    """Variant ``paper`` on ``frames`` [T, P, D]: float32 cosines, the decimal count."""
    return _keep_most_changed(evs_dissimilarity(frames.float()), ratio, PAPER)


def official_evs(frames: torch.Tensor, ratio: float) -> Selection:
    """Variant ``official`` on ``frames`` [T, P, D]: cosines in the input dtype, vLLM's count."""
    return _keep_most_changed(evs_dissimilarity(frames), ratio, OFFICIAL)


def _keep_most_changed(scores: torch.Tensor, ratio: float, variant: str) -> Selection:
    """The ``B`` (``variant``'s count) flat positions of the largest ``scores`` [T, P], ties to the
    lower index; Selection with ``keep`` [B] (ascending) and ``budgets`` [T]."""
    num_frames, tokens_per_frame = scores.shape
    budget = evs_budget(ratio, num_frames, tokens_per_frame, variant)
    order = torch.argsort(scores.reshape(-1), descending=True, stable=True)
    positions = order[:budget]
    logger.debug("evs (%s): keeping %d of %d tokens", variant, budget, num_frames * tokens_per_frame)
    return selection_from_positions(positions, num_frames, tokens_per_frame)
