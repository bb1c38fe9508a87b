"""SparseVLM's default schedule: the stage layers moved to a model's depth and the per-stage counts.

The release's v1.5 "128" list ``[303, 110, 36]`` for 576 tokens (Gumpest/SparseVLMs@26a5f48
``score.py``) as shares of the entry count, at SparseVLM layers ``[2, 5, 13]`` of a 28-layer LLM
(our default, docs/fidelity.md), scaled by ``r / 0.25``: see :mod:`baselines.sparsevlm`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vcast.models.llm_plan import layer_scaled

REFERENCE_LAYERS = 28  # the depth the default schedule is given for (Qwen2-7B)
REFERENCE_SPARSE_LAYERS = (2, 5, 13)  # SparseVLM layers l (prune after l): docs/fidelity.md, SparseVLM row
OFFICIAL_COUNTS = (303, 110, 36)  # the v1.5 "128" list, for 576 tokens (score.py)
OFFICIAL_TOKENS = 576
REFERENCE_RATIO = 0.25  # the layer-averaged retention the "128" schedule stands for
FLOOR_TOLERANCE = 1e-9


def default_stage_layers(num_layers: int) -> list[int]:
    """Stage layers ``K = l + 1`` of the default schedule moved to ``num_layers`` layers (may repeat)."""
    return [layer_scaled(layer + 1, REFERENCE_LAYERS, num_layers) for layer in REFERENCE_SPARSE_LAYERS]


def stage_counts(fractions: Sequence[float], scale: float, entry_tokens: int) -> list[int]:
    """``int(fraction * scale * N0)`` (at least 1) per stage."""
    return [max(1, math.floor(f * scale * entry_tokens + FLOOR_TOLERANCE)) for f in fractions]
