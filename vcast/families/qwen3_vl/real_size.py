"""Qwen3-VL at its published size, for the GPU kit (:mod:`vcast.gpucheck`), which builds random
weights of this shape on the device: ``real_config(arch)`` is the ``config.json`` of the released
checkpoint; ``tiny_widths(spec, arch)`` puts the tiny checkpoint's widths and depths on it (the
kit's CPU mode)."""

from __future__ import annotations

import copy
from typing import Any

from vcast.families.qwen3_vl.tiny import checkpoint_spec

# Qwen/Qwen3-VL-8B-Instruct, config.json. transformers' Qwen3VLConfig defaults are NOT these (their
# text model has 32 layers, 32 key/value heads and an MLP of 22016; the vision out_hidden_size is 3584).
QWEN3_VL_8B: dict[str, Any] = {
    "text_config": {
        "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "hidden_act": "silu",
        "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "attention_bias": False,
        "bos_token_id": 151643, "eos_token_id": 151645, "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": [24, 20, 20],
                            "mrope_interleaved": True},
    },
    "vision_config": {
        "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
        "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 4096,
        "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24], "hidden_act": "gelu_pytorch_tanh",
    },
    "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
    "vision_end_token_id": 151653, "tie_word_embeddings": False,
}


def real_config(arch: str) -> dict[str, Any]:
    """The published config of ``arch`` (a deep copy): Qwen3-VL-8B-Instruct for ``qwen3_vl``."""
    if arch != "qwen3_vl":
        raise ValueError(f"the GPU kit has the published config of qwen3_vl (Qwen3-VL-8B-Instruct) only, not {arch!r}")
    return copy.deepcopy(QWEN3_VL_8B)


def tiny_widths(spec: dict[str, Any], arch: str) -> dict[str, Any]:
    """``spec`` with the tiny checkpoint's widths and depths (MRoPE section sized to its head dim)."""
    tiny = checkpoint_spec(arch, "tiny")
    text = dict(tiny["text"])
    spec["text_config"]["rope_parameters"]["mrope_section"] = text.pop("mrope_section")
    spec["text_config"].update(text)
    spec["vision_config"].update(tiny["vision"], out_hidden_size=text["hidden_size"])
    return spec
