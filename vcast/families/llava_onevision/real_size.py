"""LLaVA-OneVision at its published size, for the GPU kit (:mod:`vcast.gpucheck`), which builds random
weights of this shape on the device: ``real_config(arch)`` is the ``config.json`` of the released
checkpoint; ``tiny_widths(spec, arch)`` puts the tiny checkpoint's widths and depths on it (the
kit's CPU mode)."""

from __future__ import annotations

import copy
from typing import Any

from vcast.families.llava_onevision.tiny import checkpoint_spec

# llava-hf/llava-onevision-qwen2-7b-ov-hf, config.json (Qwen2-7B text model, SigLIP so400m at 384 px
# without its last layer; the video path pools each frame's 27 x 27 patches to 14 x 14).
LLAVA_OV_7B: dict[str, Any] = {
    "text_config": {
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152128, "hidden_act": "silu",
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "tie_word_embeddings": False,
    },
    "vision_config": {
        "model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
        "num_hidden_layers": 26, "num_attention_heads": 16, "image_size": 384, "patch_size": 14,
        "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6, "vision_use_head": False,
    },
    "image_token_index": 151646, "video_token_index": 151647, "projector_hidden_act": "gelu",
    "vision_feature_select_strategy": "full", "vision_feature_layer": -1, "vision_aspect_ratio": "anyres_max_9",
    "image_grid_pinpoints": [[384 * i, 384 * j] for i in range(1, 7) for j in range(1, 7)],
    "multimodal_projector_bias": True, "tie_word_embeddings": False,
}


def real_config(arch: str) -> dict[str, Any]:
    """The published config of ``arch`` (a deep copy): LLaVA-OneVision-Qwen2-7B."""
    return copy.deepcopy(LLAVA_OV_7B)


def tiny_widths(spec: dict[str, Any], arch: str) -> dict[str, Any]:
    """``spec`` with the tiny checkpoint's widths and depths (anyres pinpoints scaled to its tower)."""
    tiny = checkpoint_spec(arch, "tiny")
    spec["text_config"].update(tiny["text"])
    spec["vision_config"].update(tiny["vision"])
    side = tiny["vision"]["image_size"]
    spec["image_grid_pinpoints"] = [[side * i, side * j] for i in range(1, 4) for j in range(1, 4)]
    return spec
