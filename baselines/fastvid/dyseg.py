"""DySeg: the dynamic temporal segmentation of FastVID (also used by FlashVID), as the paper variant reads it.

FastVID (LunarShen/FastVID @a40a109, L912-922 of the LLaVA-OneVision ``modeling_qwen2.py``; the
same in the LLaVA-Video and Qwen2.5-VL releases) cuts a video into segments of consecutive frames
from one global feature per frame:

* ``g_t`` = the L2-normalised frame feature, ``s_t = <g_t, g_{t+1}>`` for ``t < T - 1``;
* cuts = the ``c - 1`` lowest ``s_t`` together with every ``t`` where ``s_t < tau``;
* a segment boundary falls after each cut frame ``t`` (segment lengths are the differences of
  ``[-1, cuts, T - 1]``).

Deliberate deviations from the official code:

* ``k = min(c - 1, T - 1)`` lowest transitions: the official ``topk(s, c - 1)`` raises when a video
  has fewer than ``c`` frames (the VidCom2 re-implementation guards it the same way,
  ``fastvid_algo.py`` L141-142).
* No cut at all (``c = 1`` and no ``s_t < tau``, or ``T = 1``) gives one segment; the official
  code indexes ``cut_indices[0]`` and would fail.
* Ties among the lowest similarities go to the earlier transition (stable sort), where
  ``torch.topk`` leaves the order unspecified.

Registers no method; :mod:`baselines.fastvid.paper` calls it.
"""

from __future__ import annotations

import math

import torch

from vcast.temporal import unit_directions
from vcast.validation import check_int


def transition_similarities(features: torch.Tensor) -> torch.Tensor:
    """Cosine of consecutive frame features: ``features`` [T, D] -> [T - 1] float32.

    Zero features (norm below 1e-6) count as zero vectors (cosine 0 with everything).
    """
    unit = unit_directions(features.float())
    return (unit[:-1] * unit[1:]).sum(-1)


def segment_cuts(similarities: torch.Tensor, num_segments: int, threshold: float) -> torch.Tensor:
    """Frames after which a segment ends: ``similarities`` [T - 1] -> LongTensor [n_cuts] ascending.

    Cut ``t`` means frames ``t`` and ``t + 1`` lie in different segments. The cuts are the
    ``min(num_segments - 1, T - 1)`` lowest similarities (ties to the earlier transition) together
    with every transition whose similarity is below ``threshold``.
    """
    check_int("num_segments", num_segments, 1)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValueError(f"segment_threshold must be a finite number, got {threshold!r}")
    count = min(num_segments - 1, similarities.numel())
    lowest = torch.sort(similarities, stable=True).indices[:count]
    below = torch.nonzero(similarities < threshold).reshape(-1)
    return torch.unique(torch.cat([lowest, below]))  # unique() returns them sorted


def segment_lengths(similarities: torch.Tensor, num_segments: int, threshold: float) -> torch.Tensor:
    """Length of each segment, in frame order: ``similarities`` [T - 1] -> LongTensor [n_segments]
    (sums to ``T``)."""
    num_frames = similarities.numel() + 1
    cuts = segment_cuts(similarities, num_segments, threshold)
    edges = torch.cat([
        torch.tensor([-1], device=cuts.device, dtype=torch.long),
        cuts.long(),
        torch.tensor([num_frames - 1], device=cuts.device, dtype=torch.long),
    ])
    return edges[1:] - edges[:-1]


def dyseg(features: torch.Tensor, num_segments: int, threshold: float) -> torch.Tensor:
    """DySeg on per-frame global features [T, D] (any float dtype): LongTensor [n_segments] of
    segment lengths, in frame order, summing to ``T``."""
    if features.dim() != 2 or features.shape[0] == 0:
        raise ValueError(f"DySeg features must be [T, D] with T >= 1, got shape {tuple(features.shape)}")
    return segment_lengths(transition_similarities(features), num_segments, threshold)
