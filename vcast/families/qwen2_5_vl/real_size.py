"""Qwen2.5-VL's published size, for the GPU kit's random-weight models (:mod:`vcast.gpucheck.models`).

The values are those of ``config.json`` of Qwen/Qwen2.5-VL-7B-Instruct (the family's published
model here). That file is flat, in the pre-v5 layout: the text model's fields at the top level,
``rope_theta`` 1,000,000 and ``rope_scaling = {"type": "mrope", "mrope_section": [16, 24, 24]}``,
``max_position_embeddings`` 128,000, ``sliding_window`` 32,768 with ``use_sliding_window`` false,
the vision tower's input channels as ``in_chans``. Here they are in transformers 5's nested form
(``text_config`` with ``rope_parameters``; ``in_channels``), which ``Qwen2_5_VLConfig`` takes as is.
transformers' own ``Qwen2_5_VLConfig()`` defaults are NOT these: its text defaults are a 72B-like
model (hidden 8192, 80 layers, 64 heads, 8 key/value heads, MLP 29568), its vision hidden size is
3584 and its ``tokens_per_second`` 4.
"""

from __future__ import annotations

import copy
from typing import Any

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

_REAL: dict[str, dict[str, Any]] = {"qwen2_5_vl": QWEN2_5_VL_7B}


def real_config(arch: str) -> dict[str, Any]:
    """The published config of ``arch``'s model (a deep copy): ``Qwen2_5_VLConfig(**real_config(arch))``."""
    if arch not in _REAL:
        raise ValueError(f"no published Qwen2.5-VL config for arch {arch!r}; expected one of {', '.join(_REAL)}")
    return copy.deepcopy(_REAL[arch])
