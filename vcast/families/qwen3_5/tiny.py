"""Qwen3.5's tiny checkpoints (dense and MoE): the spec and builder behind
:func:`vcast.tiny_checkpoints.build_tiny_checkpoint` for the archs ``qwen3_5`` and ``qwen3_5_moe``.

Kept from the real models (:mod:`.real_size` has their values):

- the hybrid text tower: ``layer_types`` of three Gated DeltaNet (``linear_attention``) layers per
  gated softmax (``full_attention``) layer; the tiny and bench towers are exactly one such group of
  4 layers, so both kinds run (and the softmax layer comes last, as in the real models);
- the Gated DeltaNet's shape: more value heads than query / key heads (the real 16 -> 32 or 48),
  equal key and value head sizes, the short convolution of kernel 4;
- the gated attention (``q_proj`` twice as wide: query and output gate, which transformers' Qwen3.5
  attention always has) with ``q_norm`` / ``k_norm`` and GQA;
- partial rotary embedding (a quarter of the head dim rotates) with interleaved MRoPE, its
  ``mrope_section`` sized to the rotating dims (the real ``[11, 11, 10]`` for 64 of 256);
- the MoE: top-k routed experts (softmax router, top-k renormalised) plus the sigmoid-gated
  shared expert on every layer;
- the vision tower: Qwen3-VL's ViT (patch 16, temporal patch 2, 2x2 merge, learned position
  embedding interpolated) without DeepStack;
- the processors: ``Qwen3VLProcessor`` with ``Qwen2VLImageProcessor`` and ``Qwen3VLVideoProcessor``
  at the published values (only the pixel budgets shrink for ``tiny``), the tokenizer's special
  tokens in the real order (ids 256 + index here, 248044 + index in the real vocabulary), and a
  chat template that writes ``<|vision_start|><|video_pad|><|vision_end|>`` per video and, like
  the released one, opens the assistant turn with ``<think>\\n`` (``enable_thinking=False``: an
  empty ``<think>\\n\\n</think>\\n\\n``).

Without ``flash-linear-attention`` and ``causal-conv1d`` (not installed here) transformers runs the
DeltaNet's chunked delta rule, its one-token recurrence and the causal convolution in plain torch,
on CPU as on GPU; a tiny forward takes well under a second on CPU.
"""

from __future__ import annotations

import copy
from typing import Any

from vcast.tiny_qwen import generation_config, timestamped_processor, vision_token_ids
from vcast.tiny_tokenizer import QWEN_SPECIALS, build_tokenizer, padded_vocab

SIZES: tuple[str, ...] = ("tiny", "bench")

# The Qwen special tokens, then the thinking markers the chat template writes.
_SPECIALS: tuple[str, ...] = (*QWEN_SPECIALS, "<think>", "</think>")

# The Qwen3.5 chat template without tools: ChatML turns, one vision block per image / video (the
# processor expands the pad token into the frames' tokens and timestamps), and the assistant turn
# opened in thinking mode unless ``enable_thinking=False``.
CHAT_TEMPLATE = (
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
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}"
    "{%- endif %}"
)

# Text towers: one group of [linear, linear, linear, full]. head_dim * partial_rotary_factor (0.25)
# rotating dims, mrope_section sums to half of them with 3 * section[1] <= that half.
_TEXT: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, mrope_section=[2, 1, 1],
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
    ),
    "bench": dict(
        hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=128, mrope_section=[6, 5, 5],
        linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=64, linear_value_head_dim=64,
        linear_conv_kernel_dim=4,
    ),
}
_LAYER_GROUP = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
# Qwen3-VL's ViT without DeepStack (the real one: 27 blocks of 1152, heads 16).
_VISION: dict[str, dict[str, Any]] = {
    "tiny": dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, num_position_embeddings=64),
    "bench": dict(depth=4, hidden_size=64, intermediate_size=128, num_heads=4, num_position_embeddings=256),
}
_MOE: dict[str, dict[str, Any]] = {
    "tiny": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32),
    "bench": dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=384,
                  shared_expert_intermediate_size=384),
}
# Video and image pixel budgets in transformers' processor keys ({shortest_edge: min, longest_edge:
# max}). bench: the published ones (the Qwen3.5 checkpoints ship Qwen3-VL's processor configs:
# video 4096 .. 25,165,824 pixels over all frames, image 65,536 .. 16,777,216), so a clip becomes
# as many tokens as with the real models; tiny caps them so a small clip stays small.
_VIDEO_SIZE: dict[str, dict[str, int]] = {
    "tiny": {"shortest_edge": 4 * 32 * 32, "longest_edge": 64 * 32 * 32},
    "bench": {"shortest_edge": 4096, "longest_edge": 25_165_824},
}
_IMAGE_SIZE: dict[str, dict[str, int]] = {
    "tiny": {"shortest_edge": 4 * 32 * 32, "longest_edge": 64 * 32 * 32},
    "bench": {"shortest_edge": 64 * 32 * 32, "longest_edge": 16384 * 32 * 32},
}


def checkpoint_spec(arch: str, size: str) -> dict[str, Any]:
    """The hyper-parameters of ``(arch, size)`` (a deep copy); ``size`` checked by the caller."""
    if arch not in ("qwen3_5", "qwen3_5_moe"):
        raise ValueError(f"unknown Qwen3.5 arch {arch!r}")
    text = dict(_TEXT[size], layer_types=list(_LAYER_GROUP) * (_TEXT[size]["num_hidden_layers"] // 4))
    spec = {"text": text, "vision": _VISION[size], "video_size": _VIDEO_SIZE[size], "image_size": _IMAGE_SIZE[size]}
    if arch == "qwen3_5_moe":
        spec["moe"] = _MOE[size]
    return copy.deepcopy(spec)


def build(arch: str, size: str, words: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """``(model, processor)`` of ``arch`` at ``size``, in memory (the caller seeds the weights)."""
    from transformers import (Qwen3_5Config, Qwen3_5ForConditionalGeneration, Qwen3_5MoeConfig,
                              Qwen3_5MoeForConditionalGeneration)

    spec = checkpoint_spec(arch, size)
    # " seconds" is one token, as in the real tokenizer (each temporal patch's "<t seconds>" prefix).
    tokenizer = build_tokenizer(_SPECIALS, CHAT_TEMPLATE, eos="<|im_end|>", pad="<|endoftext|>",
                                words=(" seconds", *words))
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _SPECIALS}

    text = dict(spec["text"])
    mrope_section = text.pop("mrope_section")
    text.update(
        vocab_size=padded_vocab(len(tokenizer)),
        hidden_act="silu",
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        attention_bias=False,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=ids["<|endoftext|>"],
        pad_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": mrope_section, "mrope_interleaved": True},
    )
    vision = dict(spec["vision"])
    vision.update(patch_size=16, temporal_patch_size=2, spatial_merge_size=2, in_channels=3,
                  hidden_act="gelu_pytorch_tanh", out_hidden_size=text["hidden_size"])
    common = vision_token_ids(ids)
    if arch == "qwen3_5_moe":
        text.update(spec["moe"], output_router_logits=False)
        config = Qwen3_5MoeConfig(text_config=text, vision_config=vision, **common)
        model = Qwen3_5MoeForConditionalGeneration(config)
    else:
        config = Qwen3_5Config(text_config=text, vision_config=vision, **common)
        model = Qwen3_5ForConditionalGeneration(config)
    model.generation_config = generation_config(ids, bos=False)
    # The published Qwen3.5 processor values (see _VIDEO_SIZE); only the pixel budgets shrink for `tiny`.
    processor = timestamped_processor(tokenizer, CHAT_TEMPLATE, spec["image_size"], spec["video_size"])
    return model, processor
