"""Qwen3-VL's tiny checkpoints (dense and MoE): the spec and builder behind
:func:`vcast.tiny_checkpoints.build_tiny_checkpoint` for the archs ``qwen3_vl`` and ``qwen3_vl_moe``.

Kept from the real models: patch 16, temporal patch 2, 2x2 spatial merge, interleaved MRoPE
(``mrope_section`` sized to the head dim), DeepStack (3 injection layers, all within the text
depth), the MoE's top-k routed experts, the Instruct chat template and the published processor
values (only the pixel budgets shrink for ``tiny``).
"""

from __future__ import annotations

import copy
from typing import Any

from vcast.tiny_qwen import generation_config, timestamped_processor, vision_token_ids
from vcast.tiny_tokenizer import QWEN_SPECIALS, build_tokenizer, padded_vocab

# "demo" is the shape of the trained demo model (vcast.demo_model), dense only.
SIZES: tuple[str, ...] = ("tiny", "bench", "demo")

# The Qwen3-VL Instruct chat template (tool calls left out): system/user/assistant turns in
# ChatML, "<|vision_start|><|image_pad|><|vision_end|>" per image and
# "<|vision_start|><|video_pad|><|vision_end|>" per video; the processor expands the pad token.
_QWEN3_VL_CHAT_TEMPLATE = (
    "{%- set image_count = namespace(value=0) %}{%- set video_count = namespace(value=0) %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for content in message['content'] %}"
    "{%- if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{%- set image_count.value = image_count.value + 1 %}"
    "{%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif content['type'] == 'video' or 'video' in content %}"
    "{%- set video_count.value = video_count.value + 1 %}"
    "{%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{%- elif 'text' in content %}{{- content['text'] }}"
    "{%- endif %}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Text towers. head_dim = hidden / heads; mrope_section sums to head_dim / 2 with
# 3 * section[1] <= head_dim / 2 (interleaved MRoPE), as [24, 20, 20] does for head_dim 128.
_QWEN_TEXT: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, mrope_section=[4, 2, 2],
    ),
    "bench": dict(
        hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=4, head_dim=64, mrope_section=[12, 10, 10],
    ),
    # rope_theta 10,000 instead of the released 5,000,000 (set for 256k-token contexts): the demo
    # model's prompts are ~500 tokens, and it learns to find an option's letter far sooner so.
    "demo": dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=4, head_dim=32, mrope_section=[8, 4, 4], rope_theta=10_000.0,
    ),
}
# Qwen3-VL vision towers: patch 16, temporal patch 2, merge 2; DeepStack taps at 3 blocks
# (the real [8, 16, 24] of 27 scaled down), all < depth; the text depth (>= 3) covers all 3
# injections.
_QWEN_VISION: dict[str, dict[str, Any]] = {
    "tiny": dict(depth=3, hidden_size=32, intermediate_size=64, num_heads=2, num_position_embeddings=64,
                 deepstack_visual_indexes=[0, 1, 2]),
    "bench": dict(depth=4, hidden_size=64, intermediate_size=128, num_heads=4, num_position_embeddings=256,
                  deepstack_visual_indexes=[1, 2, 3]),
    "demo": dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=2, num_position_embeddings=64,
                 deepstack_visual_indexes=[0, 1]),
}
_QWEN_MOE: dict[str, dict[str, Any]] = {
    "tiny": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1),
    "bench": dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=384, decoder_sparse_step=1),
}
# Qwen3-VL video processor pixel budgets, over all frames (t * h * w), in transformers'
# Qwen3VLVideoProcessor keys (``size`` = {shortest_edge: min_pixels, longest_edge: max_pixels}).
# bench: the published ones, ``video_preprocessor_config.json`` of the Qwen/Qwen3-VL-*-Instruct
# checkpoints: min 4096 = 4 * 32 * 32, max 25,165,824 = 24576 * 32 * 32 pixels. (The class defaults,
# 128 * 32 * 32 .. 768 * 32 * 32, would shrink 64 frames of 448 px to P = 9 instead of 196.)
# fps 2 and 4..768 frames are the class defaults, which those configs leave as they are (the
# values of qwen-vl-utils' FPS, FPS_MIN_FRAMES, FPS_MAX_FRAMES). tiny caps the budget so a small
# clip stays small (64x64 frames map to 2x2 tokens per temporal patch).
_QWEN_VIDEO_SIZE: dict[str, dict[str, int]] = {
    "tiny": {"shortest_edge": 4 * 32 * 32, "longest_edge": 64 * 32 * 32},
    "bench": {"shortest_edge": 4096, "longest_edge": 25_165_824},
    "demo": {"shortest_edge": 4 * 32 * 32, "longest_edge": 64 * 32 * 32},
}
# bench: ``preprocessor_config.json`` of the same checkpoints (65,536 .. 16,777,216 pixels).
_QWEN_IMAGE_SIZE: dict[str, dict[str, int]] = {
    "tiny": {"shortest_edge": 4 * 32 * 32, "longest_edge": 64 * 32 * 32},
    "bench": {"shortest_edge": 64 * 32 * 32, "longest_edge": 16384 * 32 * 32},
    "demo": {"shortest_edge": 4 * 32 * 32, "longest_edge": 64 * 32 * 32},
}

def checkpoint_spec(arch: str, size: str) -> dict[str, Any]:
    """The hyper-parameters of ``(arch, size)`` (a deep copy); ``size`` checked by the caller."""
    if size == "demo" and arch != "qwen3_vl":
        raise ValueError(f"size 'demo' exists for qwen3_vl only, not {arch!r}")
    spec = {"text": _QWEN_TEXT[size], "vision": _QWEN_VISION[size], "video_size": _QWEN_VIDEO_SIZE[size],
            "image_size": _QWEN_IMAGE_SIZE[size]}
    if arch == "qwen3_vl_moe":
        spec["moe"] = _QWEN_MOE[size]
    return copy.deepcopy(spec)


def build(arch: str, size: str, words: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """``(model, processor)`` of ``arch`` at ``size``, in memory (the caller seeds the weights)."""
    from transformers import (Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLMoeConfig,
                              Qwen3VLMoeForConditionalGeneration)

    spec = checkpoint_spec(arch, size)
    # " seconds" is one token, as in the real tokenizer: each temporal patch's "<t seconds>"
    # prefix then costs about as many tokens as it does with real checkpoints.
    tokenizer = build_tokenizer(QWEN_SPECIALS, _QWEN3_VL_CHAT_TEMPLATE, eos="<|im_end|>", pad="<|endoftext|>",
                                 words=(" seconds", *words))
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}

    text = dict(spec["text"])
    mrope_section = text.pop("mrope_section")
    rope_theta = text.pop("rope_theta", 5_000_000.0)
    text.update(
        vocab_size=padded_vocab(len(tokenizer)),
        hidden_act="silu",
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta, "mrope_section": mrope_section,
                         "mrope_interleaved": True},
    )
    vision = dict(spec["vision"])
    vision.update(patch_size=16, temporal_patch_size=2, spatial_merge_size=2, in_channels=3,
                  hidden_act="gelu_pytorch_tanh", out_hidden_size=text["hidden_size"])
    common = vision_token_ids(ids)
    if arch == "qwen3_vl_moe":
        text.update(spec["moe"], mlp_only_layers=[], output_router_logits=False)
        config = Qwen3VLMoeConfig(text_config=text, vision_config=vision, **common)
        model = Qwen3VLMoeForConditionalGeneration(config)
    else:
        config = Qwen3VLConfig(text_config=text, vision_config=vision, **common)
        model = Qwen3VLForConditionalGeneration(config)
    model.generation_config = generation_config(ids)
    # Real Qwen3-VL preprocessor values (see _QWEN_VIDEO_SIZE); only the pixel budgets shrink for `tiny`.
    processor = timestamped_processor(tokenizer, _QWEN3_VL_CHAT_TEMPLATE, spec["image_size"], spec["video_size"])
    return model, processor
