"""Qwen3-VL's vision FLOPs shape (:mod:`vcast.models.flops` has the formulas and conventions).

Per temporal patch of ``p`` patches: the patch embedding, every ViT block with attention within
the temporal patch (``cu_seqlens``), then the patch merger once plus once per DeepStack layer.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from vcast.models.flops import VisionShape, grid_units, merging_vit_shape
from vcast.models.flops import vision_flops as shape_flops


def vision_shape(config: Any) -> VisionShape:
    """From a Qwen3-VL / Qwen3-VL-MoE config (object or dict)."""
    return merging_vit_shape(config)


def vision_flops(config: Any, units: Sequence[tuple[int, int]]) -> float:
    return shape_flops(vision_shape(config), units)


def vision_units(config: Any, inputs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """One unit per row ``(t, h, w)`` of ``video_grid_thw`` / ``image_grid_thw``."""
    return grid_units(inputs)
