"""LLaVA-OneVision's vision FLOPs shape (:mod:`vcast.models.flops` has the formulas and conventions).

Per frame: SigLIP over the frame's patches (attention within the frame), then the two-layer
projector on the selected features.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from vcast.models.flops import VisionShape, config_value, vision_flops as shape_flops


def vision_shape(config: Any) -> VisionShape:
    """From a LLaVA-OneVision config (object or dict)."""
    vision, text = config_value(config, "vision_config"), config_value(config, "text_config")
    layer = config_value(config, "vision_feature_layer", -1)
    patch = int(config_value(vision, "patch_size"))
    return VisionShape(
        kind="siglip", hidden=int(config_value(vision, "hidden_size")),
        depth=int(config_value(vision, "num_hidden_layers")), intermediate=int(config_value(vision, "intermediate_size")),
        patch_values=int(config_value(vision, "num_channels", 3)) * patch * patch,
        out_hidden=int(config_value(text, "hidden_size")),
        feature_layers=1 if isinstance(layer, int) else len(layer),
        drop_first=config_value(config, "vision_feature_select_strategy", "full") == "default",
        head=bool(config_value(vision, "vision_use_head", False)),
    )


def vision_flops(config: Any, units: Sequence[tuple[int, int]]) -> float:
    return shape_flops(vision_shape(config), units)


def vision_units(config: Any, inputs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``pixel_values_videos [B, F, C, H, W]`` is ``B * F`` frames; ``pixel_values`` the anyres crops
    the model encodes (per image as many as its ``image_sizes`` give, as ``get_image_features``
    counts them)."""
    patch = int(config_value(config_value(config, "vision_config"), "patch_size"))
    units: list[tuple[int, int]] = []
    videos = inputs.get("pixel_values_videos")
    if videos is not None:
        batch, frames, _, height, width = videos.shape
        units.append((batch * frames, (height // patch) * (width // patch)))
    images = inputs.get("pixel_values")
    if images is not None:
        height, width = images.shape[-2:]
        units.append((_image_crops(config, images, inputs), (height // patch) * (width // patch)))
    return units


def _image_crops(config: Any, images: Any, inputs: Mapping[str, Any]) -> int:
    """The crops LLaVA-OneVision's ``get_image_features`` encodes from ``pixel_values``."""
    sizes = inputs.get("image_sizes")
    if images.dim() != 5 or sizes is None:
        return int(images.shape[0])
    from transformers.models.llava_onevision.modeling_llava_onevision import image_size_to_num_patches

    per_sample = inputs.get("batch_num_images")
    patching = [True] * len(sizes) if per_sample is None else [n == 1 for n in per_sample for _ in range(n)]
    side = int(config_value(config_value(config, "vision_config"), "image_size"))
    return sum(image_size_to_num_patches(image_size=size, grid_pinpoints=config_value(config, "image_grid_pinpoints"),
                                         patch_size=side) if patch else 1
               for size, patch in zip(sizes, patching))
