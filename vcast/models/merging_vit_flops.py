"""The vision FLOPs of the Qwen families' merging ViT, in the shape a family's ``flops`` module has
(``vision_shape``, ``vision_flops``, ``vision_units``; :mod:`vcast.models.flops` has the formulas).

Per temporal patch of ``p`` patches: the patch embedding, every block with attention within the
temporal patch (``cu_seqlens``), then the 2x2 patch merger once, plus once per DeepStack layer where
the config has them. A family whose ViT is this one names this module as its ``flops`` (or
re-exports these three beside its own ``llm_shape``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from vcast.models.flops import VisionShape, config_value
from vcast.models.flops import vision_flops as shape_flops


def vision_shape(config: Any) -> VisionShape:
    """From a config (object or dict) with the merging ViT's ``vision_config``."""
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
    """The encoder and its mergers over ``units`` (:func:`vision_units`)."""
    return shape_flops(vision_shape(config), units)


def vision_units(config: Any, inputs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """One unit per row ``(t, h, w)`` of ``video_grid_thw`` / ``image_grid_thw`` (the processors'
    grids): ``t`` temporal patches of ``h * w`` patches."""
    units: list[tuple[int, int]] = []
    for key in ("video_grid_thw", "image_grid_thw"):
        grid = inputs.get(key)
        if grid is not None:
            units += [(int(t), int(h) * int(w)) for t, h, w in grid.tolist()]
    return units
