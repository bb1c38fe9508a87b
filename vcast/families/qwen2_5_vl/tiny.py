"""The family's tiny checkpoints: the spec and builder behind
:func:`vcast.tiny_checkpoints.build_tiny_checkpoint` for the archs ``qwen2_5_vl`` and ``qwen2_vl``.

Kept from the real models (Qwen/Qwen2.5-VL-*-Instruct): patch 14, temporal patch 2, 2x2 spatial
merge, the windowed ViT (a window of 2x2 merge units for ``tiny``, 4x4 = the real 112 px for
``bench``, with full-attention blocks interleaved and the last block full, as in the real
``fullatt_block_indexes`` [7, 15, 23, 31] of 32), RMSNorm and SwiGLU in the ViT, MRoPE
(``mrope_section`` sized to the head dim in the real 1 : 1.5 : 1.5 proportion, not interleaved),
absolute-time temporal positions (``tokens_per_second`` 2), the Instruct chat template (ChatML,
default system turn) and the published processor classes and values; only the pixel budgets
shrink for ``tiny`` (an 8 x 128 x 128 clip becomes 4 temporal patches of 4 x 4 tokens).

``qwen2_vl`` (Qwen/Qwen2-VL-*-Instruct) is the same but for its ViT, which has no windows (every block
attends over each temporal patch), LayerNorm and a ``fc1``/``fc2`` QuickGELU MLP of ``embed_dim *
mlp_ratio`` (the real ratio 4), and for its temporal MRoPE (the temporal patch's index, no
``tokens_per_second``); its processor is ``Qwen2VLProcessor`` with the same image and video
processors and values (Qwen/Qwen2-VL-7B-Instruct's ``preprocessor_config.json`` has the same pixel
bounds, patch, merge and mean/std) and the same chat template.
"""

from __future__ import annotations

import copy
from typing import Any

from vcast.families.qwen2_5_vl import arch_traits
from vcast.tiny_qwen import generation_config, vision_token_ids
from vcast.tiny_tokenizer import QWEN_SPECIALS, build_tokenizer, padded_vocab

SIZES: tuple[str, ...] = ("tiny", "bench")

# The Qwen2.5-VL Instruct chat template (chat_template.json of Qwen/Qwen2.5-VL-7B-Instruct, the
# same as Qwen2-VL's): ChatML, a default "You are a helpful assistant." system turn when the
# conversation has none, "<|vision_start|><|image_pad|><|vision_end|>" per image and
# "<|vision_start|><|video_pad|><|vision_end|>" per video; the processor expands the pad token
# into one run of T * P tokens per video (no per-frame timestamps, unlike Qwen3-VL).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Text towers. head_dim = hidden / heads (Qwen2.5-VL has no separate head_dim); mrope_section sums
# to head_dim / 2, split t : h : w like the real [16, 24, 24] of head_dim 128.
_TEXT: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, mrope_section=[2, 3, 3]),
    "bench": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=4, mrope_section=[8, 12, 12]),
}
# Qwen2.5-VL vision towers: window_size in pixels (window_size // patch // merge merge units per side: the
# real 112 px is 4; tiny's 56 px is 2, still more than one merge unit); the full-attention blocks
# are every other one and include the last (the feature layer VisionZip & co. read), as the real
# [7, 15, 23, 31] of 32 does.
_VISION: dict[str, dict[str, Any]] = {
    "tiny": dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, window_size=56,
                 fullatt_block_indexes=[1]),
    "bench": dict(depth=4, hidden_size=64, intermediate_size=128, num_heads=4, window_size=112,
                  fullatt_block_indexes=[1, 3]),
}
# Qwen2-VL vision towers: no windows; width embed_dim, MLP embed_dim * mlp_ratio (the real 4: 1280 -> 5120).
_VISION_QWEN2: dict[str, dict[str, Any]] = {
    "tiny": dict(depth=2, embed_dim=32, mlp_ratio=4, num_heads=2),
    "bench": dict(depth=4, embed_dim=64, mlp_ratio=4, num_heads=4),
}
# Pixel budgets per frame (transformers' Qwen2VL*Processor ``size`` = {shortest_edge: min_pixels,
# longest_edge: max_pixels}). bench: the published ones, ``preprocessor_config.json`` of
# Qwen/Qwen2.5-VL-*-Instruct: min_pixels 3136 = 4 * 28 * 28, max_pixels 12,845,056 = 16384 * 28 * 28,
# which AutoProcessor also gives the video processor (those repositories have no
# video_preprocessor_config.json; the class defaults 128 * 28 * 28 .. 768 * 28 * 28 are
# qwen-vl-utils' VIDEO_MIN_PIXELS / VIDEO_MAX_PIXELS, which apply only where qwen-vl-utils resizes).
# tiny: at most 16 merged tokens per frame (128 x 128 -> 112 x 112 -> 4 x 4 tokens).
_VIDEO_SIZE: dict[str, dict[str, int]] = {
    "tiny": {"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28},
    "bench": {"shortest_edge": 3136, "longest_edge": 12_845_056},
}
_IMAGE_SIZE: dict[str, dict[str, int]] = {
    "tiny": {"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28},
    "bench": {"shortest_edge": 3136, "longest_edge": 12_845_056},
}
# OpenAI CLIP's mean and std, as in the published preprocessor_config.json.
_MEAN = [0.48145466, 0.4578275, 0.40821073]
_STD = [0.26862954, 0.26130258, 0.27577711]


def checkpoint_spec(arch: str, size: str) -> dict[str, Any]:
    """The hyper-parameters of ``(arch, size)`` (a deep copy); ``size`` checked by the caller."""
    vision = _VISION if arch_traits(arch).windowed_vit else _VISION_QWEN2
    return copy.deepcopy({"text": _TEXT[size], "vision": vision[size], "video_size": _VIDEO_SIZE[size],
                          "image_size": _IMAGE_SIZE[size]})


def build(arch: str, size: str, words: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """``(model, processor)`` of ``arch`` at ``size``, in memory (the caller seeds the weights)."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    spec = checkpoint_spec(arch, size)
    tokenizer = build_tokenizer(QWEN_SPECIALS, CHAT_TEMPLATE, eos="<|im_end|>", pad="<|endoftext|>", words=tuple(words))
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}

    text = dict(spec["text"])
    mrope_section = text.pop("mrope_section")
    text.update(
        vocab_size=padded_vocab(len(tokenizer)),
        hidden_act="silu",
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        use_sliding_window=False,
        tie_word_embeddings=False,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": mrope_section},
    )
    vision = dict(spec["vision"], patch_size=14, temporal_patch_size=2, spatial_merge_size=2, in_channels=3)
    if arch_traits(arch).windowed_vit:
        vision.update(hidden_act="silu", tokens_per_second=2, out_hidden_size=text["hidden_size"])
        config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, **vision_token_ids(ids))
        model = Qwen2_5_VLForConditionalGeneration(config)
        processor_class = Qwen2_5_VLProcessor
    else:  # Qwen2-VL: the merger's output width is the vision config's hidden_size
        vision.update(hidden_act="quick_gelu", hidden_size=text["hidden_size"])
        config = Qwen2VLConfig(text_config=text, vision_config=vision, **vision_token_ids(ids))
        model = Qwen2VLForConditionalGeneration(config)
        processor_class = Qwen2VLProcessor
    model.generation_config = generation_config(ids)

    proc_common = dict(patch_size=14, temporal_patch_size=2, merge_size=2, image_mean=_MEAN, image_std=_STD)
    image_processor = Qwen2VLImageProcessor(size=spec["image_size"], **proc_common)
    # do_sample_frames=False, 4..768 frames: the class defaults, which the published config keeps.
    video_processor = Qwen2VLVideoProcessor(size=spec["video_size"], do_sample_frames=False, min_frames=4,
                                            max_frames=768, cap_pixels_per_frame=False, **proc_common)
    processor = processor_class(image_processor=image_processor, tokenizer=tokenizer,
                                video_processor=video_processor, chat_template=CHAT_TEMPLATE)
    return model, processor
