"""EVS (Efficient Video Sampling): keep the tokens that changed most since the previous frame.

Paper: "Efficient Video Sampling: Pruning Temporally Redundant Tokens for Faster VLM Inference"
(NVIDIA, 2025), deployed in vLLM (``vllm/multimodal/evs.py``, switched on by
``video_pruning_rate``) and SGLang for Qwen2.5-VL / Qwen3-VL. Not a row of the V-CAST paper: it is
the pruning a serving engine already ships, so reviewers ask for it. Written here from its
definition, then compared with vLLM's function on the same inputs (docs/fidelity.md).

Definition. For the ``[T, P, D]`` post-merger tokens of one video:

* ``d[t, p] = 1 - cos(x[t, p], x[t-1, p])`` for ``t >= 1`` (the same grid cell of the previous
  frame, ``torch.nn.functional.cosine_similarity``, eps 1e-8); the first frame scores ``+inf``
  (vLLM writes 255, above any dissimilarity, which is at most 2), so it is always kept whole;
* the ``B`` tokens with the largest ``d`` over the whole video are kept (a stable descending sort
  of the flat ``t * P + p`` scores, so ties keep the lower index); pure pruning, each kept token
  keeps its own (t, h, w) position.

Budget. At least one whole frame: ``B = max(P, floor(r T P))`` (``r`` read as the decimal it is
written as, :func:`vcast.budget.paper_total_budget`). vLLM's pruning rate is ``q = 1 - r``.

Variants (``variant=``):

* ``paper`` (default): cosines in float32 whatever the input dtype (bf16 input gives the same
  kept set as its float32 copy).
* ``official``: vLLM's code as deployed: cosines in the input dtype and vLLM's count
  ``max(P, int(T P (1 - q)))`` with ``q = 1 - r`` in floating point (``r = 0.15`` gives
  ``1 - 0.85 = 0.15000000000000002``, so the two counts can differ by one token).

Hyper-parameters: none. No model inputs.
"""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.budget import paper_total_budget
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.variants import OFFICIAL, PAPER, check_variant

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


@register_method("evs", variants=(PAPER, OFFICIAL))
def evs_select(frames: torch.Tensor, ratio: float, *, variant: str = PAPER) -> Selection:
    """Keep the ``B`` tokens of ``frames`` [T, P, D] that differ most from the previous frame.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: retention ratio r in (0, 1].
        variant: "paper" (float32 cosines) or "official" (vLLM: input dtype, vLLM's count).
    Returns:
        Selection with ``keep`` [B] (ascending) and ``budgets`` [T].
    """
    variant = check_variant("evs", variant, (PAPER, OFFICIAL))
    num_frames, tokens_per_frame, _ = frames.shape
    scores = evs_dissimilarity(frames if variant == OFFICIAL else frames.float())
    budget = evs_budget(ratio, num_frames, tokens_per_frame, variant)
    order = torch.argsort(scores.reshape(-1), descending=True, stable=True)
    positions = order[:budget]
    logger.debug("evs (%s): keeping %d of %d tokens", variant, budget, num_frames * tokens_per_frame)
    return selection_from_positions(positions, num_frames, tokens_per_frame)
