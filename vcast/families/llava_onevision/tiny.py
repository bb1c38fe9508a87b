"""LLaVA-OneVision's tiny checkpoints (LLaVA-Video has the same architecture): the spec and builder
behind :func:`vcast.tiny_checkpoints.build_tiny_checkpoint` for the arch ``llava_onevision``.

Kept from the real models: the SigLIP tower (patch 14, odd patch grid like 27x27), ``full``
feature strategy, layer -1, bilinear video pooling to ``ceil(n/2)`` and the trailing
``image_newline``, anyres image grid pinpoints, the llava-hf chat template.
"""

from __future__ import annotations

import copy
from typing import Any

from vcast.tiny_tokenizer import build_tokenizer, padded_vocab

SIZES: tuple[str, ...] = ("tiny", "bench")

_LLAVA_OV_SPECIALS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>")

# The llava-hf LLaVA-OneVision chat template: images, then videos, then text of each turn.
_LLAVA_OV_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + ' ' }}"
    "{% if message['content'] is string %}{{ '\\n' + message['content'] }}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<video>' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ '\\n' + content['text'] }}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


_LLAVA_TEXT: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2),
    "bench": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=4),
}
# SigLIP towers, patch 14; image_size / 14 is odd like the real 384 / 14 -> 27, so the video
# pooling to ceil(n / 2) is exercised the same way (27 -> 14 real and bench, 5 -> 3 tiny). bench has
# the real input size (llava-onevision-qwen2-*-ov-hf: SigLIP so400m-patch14-384, frames resized to
# 384 x 384), so a frame is 196 video tokens as with the real model; only the tower is narrow.
_LLAVA_VISION: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 image_size=70, patch_size=14),
    "bench": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  image_size=384, patch_size=14),
}

def checkpoint_spec(arch: str, size: str) -> dict[str, Any]:
    """The hyper-parameters of ``(arch, size)`` (a deep copy); ``size`` checked by the caller."""
    return copy.deepcopy({"text": _LLAVA_TEXT[size], "vision": _LLAVA_VISION[size]})


def build(arch: str, size: str, words: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """``(model, processor)`` of ``arch`` at ``size``, in memory (the caller seeds the weights)."""
    if words:
        raise ValueError("extra words are for the Qwen tokenizers only")
    from transformers import (
        GenerationConfig,
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    spec = checkpoint_spec(arch, size)
    tokenizer = build_tokenizer(_LLAVA_OV_SPECIALS, _LLAVA_OV_CHAT_TEMPLATE, eos="<|im_end|>", pad="<|endoftext|>")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _LLAVA_OV_SPECIALS}

    vision = dict(spec["vision"], model_type="siglip_vision_model", hidden_act="gelu_pytorch_tanh",
                  layer_norm_eps=1e-6, vision_use_head=False)
    text = dict(spec["text"], model_type="qwen2", vocab_size=padded_vocab(len(tokenizer)), hidden_act="silu",
                max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1_000_000.0,
                bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
                tie_word_embeddings=False)
    side = vision["image_size"]
    # The real pinpoints are 384 * {1..6} squared; scaled to the tiny tower and capped at 3x3.
    pinpoints = [[side * i, side * j] for i in range(1, 4) for j in range(1, 4)]
    config = LlavaOnevisionConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=ids["<image>"],
        video_token_index=ids["<video>"],
        projector_hidden_act="gelu",
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        vision_aspect_ratio="anyres_max_9",
        image_grid_pinpoints=pinpoints,
        multimodal_projector_bias=True,
        tie_word_embeddings=False,
    )
    model = LlavaOnevisionForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
        do_sample=False,
    )
    # Real llava-onevision-qwen2-*-ov-hf preprocessor values (SigLIP mean/std 0.5), scaled sizes.
    norm = dict(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    image_processor = LlavaOnevisionImageProcessor(size={"height": side, "width": side},
                                                   image_grid_pinpoints=pinpoints, do_pad=True, **norm)
    video_processor = LlavaOnevisionVideoProcessor(size={"height": side, "width": side}, **norm)
    num_patches = (side // vision["patch_size"]) ** 2
    processor = LlavaOnevisionProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        num_image_tokens=num_patches,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
        chat_template=_LLAVA_OV_CHAT_TEMPLATE,
    )
    return model, processor
