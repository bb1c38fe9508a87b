"""Qwen3.5's FLOPs shapes (:mod:`vcast.models.flops` has the formulas and conventions).

Vision: Qwen3-VL's ViT without DeepStack. Per temporal patch of ``p`` patches: the patch embedding,
every block with attention within the temporal patch (``cu_seqlens``), then the patch merger once.

Language model: hybrid. The layers ``layer_types`` names ``"linear_attention"`` (three of every
four) are Gated DeltaNet layers, counted by :func:`vcast.models.flops.linear_attention_flops`; the
others are gated softmax attention (transformers' Qwen3.5 attention always has the output gate:
``q_proj`` yields query and gate, ``2 n d h d_h`` more than plain attention). The MoE model's MLP
is the routed top-k experts plus the shared expert and its gate, on every layer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from vcast.models.flops import LLMShape, VisionShape, config_value, vision_flops as shape_flops


def vision_shape(config: Any) -> VisionShape:
    """From a Qwen3.5 / Qwen3.5-MoE config (object or dict)."""
    vision = config_value(config, "vision_config")
    patch, temporal = int(config_value(vision, "patch_size")), int(config_value(vision, "temporal_patch_size"))
    return VisionShape(
        kind="qwen_vit", hidden=int(config_value(vision, "hidden_size")), depth=int(config_value(vision, "depth")),
        intermediate=int(config_value(vision, "intermediate_size")),
        patch_values=int(config_value(vision, "in_channels", 3)) * temporal * patch * patch,
        out_hidden=int(config_value(vision, "out_hidden_size")), merge=int(config_value(vision, "spatial_merge_size")),
        mergers=1,  # no DeepStack mergers
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


def llm_shape(config: Any) -> LLMShape:
    """The hybrid language model: linear-attention layers and dims from ``layer_types`` and the
    ``linear_*`` fields (:meth:`LLMShape.from_config`), gated softmax attention elsewhere.

    A config without ``layer_types`` (a dict written by hand) gets transformers' default pattern:
    every fourth layer (``full_attention_interval``, 4) is softmax attention, the rest linear."""
    shape = LLMShape.from_config(config)
    if not shape.linear_layers:
        text = config_value(config, "text_config", config)
        interval = int(config_value(text, "full_attention_interval", 4))
        linear = frozenset(i for i in range(shape.layers) if (i + 1) % interval)
        shape = replace(
            shape, linear_layers=linear,
            linear_key_heads=int(config_value(text, "linear_num_key_heads", 16)),
            linear_value_heads=int(config_value(text, "linear_num_value_heads", 32)),
            linear_key_dim=int(config_value(text, "linear_key_head_dim", 128)),
            linear_value_dim=int(config_value(text, "linear_value_head_dim", 128)),
            linear_conv_kernel=int(config_value(text, "linear_conv_kernel_dim", 4)),
        )
    return replace(shape, attention_gate=True)
