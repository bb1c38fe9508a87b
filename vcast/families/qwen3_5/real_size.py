"""The published sizes of Qwen3.5's two evaluated checkpoints, as config dicts the GPU kit builds
random-weight models from (``Qwen3_5Config(**real_config("qwen3_5"))``,
``Qwen3_5MoeConfig(**real_config("qwen3_5_moe"))``).

Sources (no download here; each value below was established offline as noted):

- Qwen/Qwen3.5-27B (``qwen3_5``): hidden 5120, 64 layers (16 x [3 Gated DeltaNet, 1 gated
  attention]), 24 query / 4 key-value heads of 256, MLP 17408, Gated DeltaNet 16 query-key heads
  and 48 value heads of 128 with a conv kernel of 4, vocabulary 248,320, RoPE theta 10,000,000 on a
  quarter of the head dim, MRoPE section [11, 11, 10] interleaved, 262,144 positions, and the
  vision tower's ``out_hidden_size`` 5120: the checkpoint's ``config.json`` as reproduced in public
  code (a ``Qwen3_5Config(...)`` copy of it, and THUDM/slime's ``scripts/models/qwen3.5-27B.sh``,
  which agree), and the model card's "Hidden Layout 16 x (3 x (Gated DeltaNet -> FFN) -> 1 x
  (Gated Attention -> FFN))", "V 48, QK 16" heads (as quoted for the same-shaped Qwen3.6-27B).
  transformers' ``Qwen3_5TextConfig`` defaults (hidden 4096, 32 layers, 16 heads, 32 value heads,
  MLP 12288) are a different, smaller model, not this one.
- Qwen/Qwen3.5-35B-A3B (``qwen3_5_moe``): hidden 2048, 40 layers (10 x [3, 1]), 16 query / 2
  key-value heads of 256, 256 experts, top-8, expert width 512, shared expert 512, Gated DeltaNet
  16 / 32 heads of 128, conv 4, vocabulary 248,320, RoPE theta 10,000,000, partial 0.25, MRoPE
  [11, 11, 10]: THUDM/slime's ``scripts/models/qwen3.5-35B-A3B.sh`` and a public inventory of the
  checkpoint's ``config.json`` (snapshot ec2d4ec), which agree; they are also transformers'
  ``Qwen3_5MoeTextConfig`` defaults (whose docstring cites this checkpoint), except the vision
  ``out_hidden_size``, which must equal the text hidden size (2048; the class default 3584 does not).
- Both vision towers: Qwen3-VL's ViT without DeepStack: 27 blocks of 1152 (MLP 4304, 16 heads),
  patch 16, temporal patch 2, merge 2, 2304 learned positions (the 27B copy of ``config.json``,
  the Qwen3.6-27B spec sheet, and transformers' vision-config defaults agree).
- Token ids (``<|vision_start|>`` 248053, ``<|vision_end|>`` 248054, ``<|image_pad|>`` 248056,
  ``<|video_pad|>`` 248057, ``<|endoftext|>`` 248044, ``<|im_end|>`` 248046): transformers' config
  defaults and the 27B copy.

Not confirmed: ``max_position_embeddings`` of the 35B-A3B (262,144 assumed like the 27B; it does not
change any count here) and the 35B-A3B's ``<|im_end|>`` id (assumed the same vocabulary as the 27B).
None of the unconfirmed values changes a FLOPs count or a tensor shape the kit times.
"""

from __future__ import annotations

import copy
from typing import Any

_ROPE = {"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
         "mrope_section": [11, 11, 10], "mrope_interleaved": True}
_VISION = {
    "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
    "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "num_position_embeddings": 2304,
    "hidden_act": "gelu_pytorch_tanh",
}
_TOKENS = {"image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053,
           "vision_end_token_id": 248054, "tie_word_embeddings": False}
_LINEAR = {"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
           "linear_num_key_heads": 16}
_COMMON_TEXT = {"vocab_size": 248320, "hidden_act": "silu", "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
                "attention_bias": False, "head_dim": 256, "eos_token_id": 248044, "tie_word_embeddings": False}


def _layer_types(layers: int) -> list[str]:
    return ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * (layers // 4)


QWEN3_5_27B: dict[str, Any] = {
    "text_config": {
        **_COMMON_TEXT, **_LINEAR, "hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 64,
        "num_attention_heads": 24, "num_key_value_heads": 4, "linear_num_value_heads": 48,
        "layer_types": _layer_types(64), "rope_parameters": dict(_ROPE),
    },
    "vision_config": {**_VISION, "out_hidden_size": 5120},
    **_TOKENS,
}

QWEN3_5_35B_A3B: dict[str, Any] = {
    "text_config": {
        **_COMMON_TEXT, **_LINEAR, "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
        "num_key_value_heads": 2, "linear_num_value_heads": 32, "layer_types": _layer_types(40),
        "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "rope_parameters": dict(_ROPE),
    },
    "vision_config": {**_VISION, "out_hidden_size": 2048},
    **_TOKENS,
}

_CONFIGS = {"qwen3_5": QWEN3_5_27B, "qwen3_5_moe": QWEN3_5_35B_A3B}


def real_config(arch: str) -> dict[str, Any]:
    """The published config of ``arch``'s evaluated checkpoint (a deep copy), as keyword arguments
    of its transformers config class."""
    if arch not in _CONFIGS:
        raise ValueError(f"unknown Qwen3.5 arch {arch!r}; expected one of {', '.join(_CONFIGS)}")
    return copy.deepcopy(_CONFIGS[arch])


def tiny_widths(spec: dict[str, Any], arch: str) -> dict[str, Any]:
    """``spec`` with the tiny checkpoint's widths, depths and layer pattern (the GPU kit's CPU mode)."""
    from vcast.families.qwen3_5.tiny import checkpoint_spec

    tiny = checkpoint_spec(arch, "tiny")
    text = dict(tiny["text"])
    spec["text_config"]["rope_parameters"]["mrope_section"] = text.pop("mrope_section")
    spec["text_config"].update(text, **tiny.get("moe", {}))
    spec["vision_config"].update(tiny["vision"], out_hidden_size=text["hidden_size"])
    return spec
