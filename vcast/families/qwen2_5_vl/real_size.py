"""The family's published sizes, for the GPU kit's random-weight models (:mod:`vcast.gpucheck.models`):
Qwen2.5-VL-7B-Instruct (arch ``qwen2_5_vl``) and Qwen2-VL-7B-Instruct (``qwen2_vl``).

The values are those of ``config.json`` of Qwen/Qwen2.5-VL-7B-Instruct (the family's published
model here). That file is flat, in the pre-v5 layout: the text model's fields at the top level,
``rope_theta`` 1,000,000 and ``rope_scaling = {"type": "mrope", "mrope_section": [16, 24, 24]}``,
``max_position_embeddings`` 128,000, ``sliding_window`` 32,768 with ``use_sliding_window`` false,
the vision tower's input channels as ``in_chans``. Here they are in transformers 5's nested form
(``text_config`` with ``rope_parameters``; ``in_channels``), which ``Qwen2_5_VLConfig`` takes as is.
transformers' own ``Qwen2_5_VLConfig()`` defaults are NOT these: its text defaults are a 72B-like
model (hidden 8192, 80 layers, 64 heads, 8 key/value heads, MLP 29568), its vision hidden size is
3584 and its ``tokens_per_second`` 4.

Qwen2-VL-7B-Instruct's ``config.json`` is flat too, with the same text model (Qwen2-7B's shape) and a
vision tower of ``embed_dim`` 1280, ``mlp_ratio`` 4, 16 heads, 32 blocks, ``hidden_size`` 3584 (the
merger's output). That file could not be read here (offline): the values below come from
transformers' ``Qwen2VLVisionConfig()`` defaults (its docstring names Qwen2-VL-7B-Instruct) and from
the released model's printed module tree, which fixes the widths (1280 / 5120 / 3584, 28 decoder
layers with 512-wide k and v projections, MLP 18944, vocabulary 152,064). Not confirmed from the file:
``max_position_embeddings`` 32,768, ``rope_theta`` 1,000,000 (the text config class's default theta),
``mrope_section`` [16, 24, 24] (as Qwen2.5-VL's; it must sum to head_dim / 2 = 64), and ``hidden_act``
``quick_gelu`` of the vision tower (the class default; the file may not set it).
transformers' ``Qwen2VLConfig()`` text defaults are the 72B's (hidden 8192, 80 layers), NOT these.
"""

from __future__ import annotations

import copy
from typing import Any

from vcast.families.qwen2_5_vl import arch_traits

QWEN2_5_VL_7B: dict[str, Any] = {
    "text_config": {
        # Qwen2-7B's shape: head_dim = 3584 / 28 = 128, GQA with 4 key/value heads.
        "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
        "num_key_value_heads": 4, "vocab_size": 152064, "hidden_act": "silu", "max_position_embeddings": 128000,
        "rms_norm_eps": 1e-6, "use_sliding_window": False, "max_window_layers": 28, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "tie_word_embeddings": False,
        # mrope_section sums to head_dim / 2 = 64 (t, h, w frequency bands; not interleaved).
        "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [16, 24, 24]},
    },
    "vision_config": {
        # 32 blocks of width 1280 (16 heads of 80), SwiGLU MLP 3420, RMSNorm; windows of 112 px
        # (8 x 8 patches = 4 x 4 merge units) except the full-attention blocks 7, 15, 23, 31.
        "depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "in_channels": 3,
        "hidden_act": "silu", "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2,
        "out_hidden_size": 3584, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2,
    },
    "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
    "vision_end_token_id": 151653, "tie_word_embeddings": False,
}

QWEN2_VL_7B: dict[str, Any] = {
    "text_config": {
        **QWEN2_5_VL_7B["text_config"],  # the same Qwen2-7B language model and token ids
        "max_position_embeddings": 32768,  # unconfirmed (see the module docstring)
    },
    "vision_config": {
        # 32 blocks of width 1280 (16 heads of 80), fc1/fc2 MLP 1280 * 4 = 5120 with QuickGELU,
        # LayerNorm; no windows. hidden_size is the merger's output (the LLM's width).
        "depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_channels": 3, "hidden_act": "quick_gelu",
        "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2, "hidden_size": 3584,
    },
    "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
    "vision_end_token_id": 151653, "tie_word_embeddings": False,
}

_REAL: dict[str, dict[str, Any]] = {"qwen2_5_vl": QWEN2_5_VL_7B, "qwen2_vl": QWEN2_VL_7B}


def real_config(arch: str) -> dict[str, Any]:
    """The published config of ``arch``'s model (a deep copy): ``Qwen2_5_VLConfig(**real_config("qwen2_5_vl"))``,
    ``Qwen2VLConfig(**real_config("qwen2_vl"))``."""
    if arch not in _REAL:
        raise ValueError(f"no published Qwen2.5-VL config for arch {arch!r}; expected one of {', '.join(_REAL)}")
    return copy.deepcopy(_REAL[arch])


def tiny_widths(spec: dict[str, Any], arch: str) -> dict[str, Any]:
    """``spec`` with the tiny checkpoint's widths and depths (the GPU kit's CPU mode)."""
    from vcast.families.qwen2_5_vl.tiny import checkpoint_spec

    tiny = checkpoint_spec(arch, "tiny")
    text = dict(tiny["text"])
    spec["text_config"]["rope_parameters"]["mrope_section"] = text.pop("mrope_section")
    spec["text_config"].update(text, max_window_layers=text["num_hidden_layers"])
    # The merger's output width is out_hidden_size in Qwen2.5-VL's vision config, hidden_size in Qwen2-VL's.
    output = "out_hidden_size" if arch_traits(arch).gated_vit else "hidden_size"
    spec["vision_config"].update(tiny["vision"], **{output: text["hidden_size"]})
    return spec
