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
from typing import Any

from vcast.models.flops import LLMShape, config_value
from vcast.models.merging_vit_flops import vision_flops, vision_shape, vision_units

__all__ = ["llm_shape", "vision_flops", "vision_shape", "vision_units"]  # the vision ones: Qwen3-VL's ViT


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
