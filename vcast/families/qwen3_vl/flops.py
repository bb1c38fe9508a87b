"""Qwen3-VL's vision FLOPs shape (:mod:`vcast.models.flops` has the formulas and conventions).

Per temporal patch of ``p`` patches: the patch embedding, every ViT block with attention within
the temporal patch (``cu_seqlens``), then the patch merger once plus once per DeepStack layer.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from vcast.models.flops import VisionShape, config_value, vision_flops as shape_flops


def vision_shape(config: Any) -> VisionShape:
    """From a Qwen3-VL / Qwen3-VL-MoE config (object or dict)."""
    vision = config_value(config, "vision_config")
    patch, temporal = int(config_value(vision, "patch_size")), int(config_value(vision, "temporal_patch_size"))
    return VisionShape(
        kind="qwen_vit", hidden=int(config_value(vision, "hidden_size")), depth=int(config_value(vision, "depth")),
        intermediate=int(config_value(vision, "intermediate_size")),
        patch_values=int(config_value(vision, "in_channels", 3)) * temporal * patch * patch,
        out_hidden=int(config_value(vision, "out_hidden_size")), merge=int(config_value(vision, "spatial_merge_size")),
        mergers=1 + len(config_value(vision, "deepstack_visual_indexes", ())),
    )


def vision_flops(config: Any, units: Sequence[tuple[int, int]]) -> float:
    return shape_flops(vision_shape(config), units)


def vision_units(config: Any, inputs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """One unit per row ``(t, h, w)`` of ``video_grid_thw`` / ``image_grid_thw``: ``t`` temporal
    patches of ``h * w`` patches."""
    units: list[tuple[int, int]] = []
    for key in ("video_grid_thw", "image_grid_thw"):
        grid = inputs.get(key)
        if grid is not None:
            units += [(int(t), int(h) * int(w)) for t, h, w in grid.tolist()]
    return units
