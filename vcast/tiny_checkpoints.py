"""Tiny random-weight Hugging Face checkpoints of the real video-LLM classes, built offline.

``build_tiny_checkpoint(arch, size, out_dir, seed)`` writes a folder that loads with
``AutoModelForImageTextToText.from_pretrained`` and ``AutoProcessor.from_pretrained`` without any
hub access: the model (``Qwen3VLForConditionalGeneration``, ``Qwen3VLMoeForConditionalGeneration``
or ``LlavaOnevisionForConditionalGeneration``) with seeded random weights, a byte-level BPE
tokenizer built with the ``tokenizers`` library (every byte is a token, so any text round-trips)
plus the family's special tokens, the family's chat template, and the image and video processor
configs.

Sizes:

* ``tiny``: a forward in well under a second on CPU; for unit tests.
* ``bench``: the LLM (hidden 512 x 4 layers) dominates prefill while the vision tower stays small;
  for CPU timing of token pruning. Its processors take videos the way the released checkpoints
  do, so a clip becomes as many tokens as with the real models: Qwen3-VL with the published
  video pixel budget (64 frames of 448 x 448 -> 32 temporal patches x 14 x 14 = 196 tokens each),
  LLaVA-OneVision with the real 384 px SigLIP input (27 x 27 patches, pooled to 14 x 14 = 196).
* ``demo`` (Qwen3-VL only): the shape of the demo model that ``vcast.demo_model`` trains on the
  synthetic benchmark (text 128 wide x 4 layers, vision 64 wide x 2 blocks); random here.

Architecture features that are kept: Qwen3-VL patch 16, temporal patch 2, 2x2 spatial merge,
interleaved MRoPE (``mrope_section`` sized to the head dim), DeepStack (3 injection layers, all
within the text depth); Qwen3-VL-MoE top-k routed experts; LLaVA-OneVision's SigLIP tower
(patch 14, odd patch grid like 27x27), ``full`` feature strategy, layer -1, bilinear video pooling
to ``ceil(n/2)`` and the trailing ``image_newline``, anyres image grid pinpoints.
"""

from __future__ import annotations

import copy
import logging
import math
import os
from pathlib import Path
from typing import Any

import torch

from vcast.atomic_files import folder_in_place

logger = logging.getLogger(__name__)

ARCHS: tuple[str, ...] = ("qwen3_vl", "qwen3_vl_moe", "llava_onevision")
SIZES: tuple[str, ...] = ("tiny", "bench", "demo")
# "demo" is the shape of the trained demo model (vcast.demo_model), Qwen3-VL only.
_QWEN_ONLY_SIZES: tuple[str, ...] = ("demo",)

# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------

# Special tokens in the real families' order (Qwen2 tokenizer: <|endoftext|> first, then chat and
# vision tokens). Ids are 256 + index because the 256 byte tokens come first.
_QWEN3_VL_SPECIALS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
_LLAVA_OV_SPECIALS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>")

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


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable unicode map (what the ByteLevel pre-tokenizer emits)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _build_tokenizer(specials: tuple[str, ...], chat_template: str, eos: str, pad: str,
                     words: tuple[str, ...] = ()) -> Any:
    """A byte-level BPE plus ``specials`` from id 256 on.

    Token id == byte value for single bytes; each of ``words`` (ASCII, as the ByteLevel
    pre-tokenizer sees it, e.g. " seconds") becomes one token through a chain of merges, with
    ids after the specials, so frequent template text is as short as in the real tokenizer.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_map = byte_to_unicode()
    vocab = {byte_map[b]: b for b in range(256)}
    for i, tok in enumerate(specials):
        vocab[tok] = 256 + i
    merges: list[tuple[str, str]] = []
    for word in words:
        symbols = [byte_map[b] for b in word.encode()]
        prefix = symbols[0]
        for symbol in symbols[1:]:
            merges.append((prefix, symbol))
            prefix += symbol
            vocab.setdefault(prefix, len(vocab))
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=not merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    # Registered as special tokens so they are never split; their ids are already in the vocab.
    backend.add_special_tokens(list(specials))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=eos,
        pad_token=pad,
        unk_token=None,
        bos_token=None,
        model_max_length=131072,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = chat_template
    for i, tok in enumerate(specials):
        got = tokenizer.convert_tokens_to_ids(tok)
        if got != 256 + i:  # pragma: no cover - guards against a tokenizers behaviour change
            raise RuntimeError(f"special token {tok!r} got id {got}, expected {256 + i}")
    return tokenizer


def _padded_vocab(n_tokens: int, multiple: int = 64) -> int:
    """Round the embedding rows up, as the real checkpoints do (151936 rows for ~151.7k tokens)."""
    return int(math.ceil(n_tokens / multiple) * multiple)


# ---------------------------------------------------------------------------------------------
# Per-architecture specs
# ---------------------------------------------------------------------------------------------

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
    """The hyper-parameters ``build_tiny_checkpoint`` uses for ``(arch, size)`` (a deep copy)."""
    _validate(arch, size)
    if arch == "llava_onevision":
        spec = {"text": _LLAVA_TEXT[size], "vision": _LLAVA_VISION[size]}
    else:
        spec = {"text": _QWEN_TEXT[size], "vision": _QWEN_VISION[size], "video_size": _QWEN_VIDEO_SIZE[size],
                "image_size": _QWEN_IMAGE_SIZE[size]}
        if arch == "qwen3_vl_moe":
            spec["moe"] = _QWEN_MOE[size]
    return copy.deepcopy(spec)


def _validate(arch: str, size: str) -> None:
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; expected one of {', '.join(ARCHS)}")
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {', '.join(SIZES)}")
    if size in _QWEN_ONLY_SIZES and arch != "qwen3_vl":
        raise ValueError(f"size {size!r} exists for qwen3_vl only, not {arch!r}")


# ---------------------------------------------------------------------------------------------
# Builders: each returns (model, processor)
# ---------------------------------------------------------------------------------------------


def _build_qwen3_vl(arch: str, size: str, words: tuple[str, ...] = ()) -> tuple[Any, Any]:
    from transformers import (
        GenerationConfig,
        Qwen2VLImageProcessor,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLMoeConfig,
        Qwen3VLMoeForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    spec = checkpoint_spec(arch, size)
    # " seconds" is one token, as in the real tokenizer: each temporal patch's "<t seconds>"
    # prefix then costs about as many tokens as it does with real checkpoints.
    tokenizer = _build_tokenizer(_QWEN3_VL_SPECIALS, _QWEN3_VL_CHAT_TEMPLATE, eos="<|im_end|>", pad="<|endoftext|>",
                                 words=(" seconds", *words))
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _QWEN3_VL_SPECIALS}

    text = dict(spec["text"])
    mrope_section = text.pop("mrope_section")
    rope_theta = text.pop("rope_theta", 5_000_000.0)
    text.update(
        vocab_size=_padded_vocab(len(tokenizer)),
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
    common = dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    if arch == "qwen3_vl_moe":
        text.update(spec["moe"], mlp_only_layers=[], output_router_logits=False)
        config = Qwen3VLMoeConfig(text_config=text, vision_config=vision, **common)
        model = Qwen3VLMoeForConditionalGeneration(config)
    else:
        config = Qwen3VLConfig(text_config=text, vision_config=vision, **common)
        model = Qwen3VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        do_sample=False,
    )

    # Real Qwen3-VL preprocessor values (see _QWEN_VIDEO_SIZE); only the pixel budgets shrink for `tiny`.
    proc_common = dict(patch_size=16, temporal_patch_size=2, merge_size=2,
                       image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    image_processor = Qwen2VLImageProcessor(size=spec["image_size"], **proc_common)
    video_processor = Qwen3VLVideoProcessor(size=spec["video_size"], fps=2, min_frames=4, max_frames=768,
                                            do_sample_frames=True, cap_pixels_per_frame=False, **proc_common)
    processor = Qwen3VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                 video_processor=video_processor, chat_template=_QWEN3_VL_CHAT_TEMPLATE)
    return model, processor


def _build_llava_onevision(size: str) -> tuple[Any, Any]:
    from transformers import (
        GenerationConfig,
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    spec = checkpoint_spec("llava_onevision", size)
    tokenizer = _build_tokenizer(_LLAVA_OV_SPECIALS, _LLAVA_OV_CHAT_TEMPLATE, eos="<|im_end|>", pad="<|endoftext|>")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _LLAVA_OV_SPECIALS}

    vision = dict(spec["vision"], model_type="siglip_vision_model", hidden_act="gelu_pytorch_tanh",
                  layer_norm_eps=1e-6, vision_use_head=False)
    text = dict(spec["text"], model_type="qwen2", vocab_size=_padded_vocab(len(tokenizer)), hidden_act="silu",
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


def build(arch: str, size: str, seed: int, words: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """Construct the model (weights seeded by ``seed``, global RNG untouched) and processor, in memory.

    ``words`` (Qwen3-VL only): extra whole-word tokens for the tokenizer, each ASCII word as the
    byte-level pre-tokenizer cuts it (``" blue"``); the demo model's are its prompts' words
    (:mod:`vcast.demo_model.vocabulary`), as a real vocabulary has them.
    """
    _validate(arch, size)
    if words and arch == "llava_onevision":
        raise ValueError("extra words are for the Qwen3-VL tokenizers only")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if arch == "llava_onevision":
            model, processor = _build_llava_onevision(size)
        else:
            model, processor = _build_qwen3_vl(arch, size, tuple(words))
    model.eval()
    return model, processor


# ---------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------


def build_tiny_checkpoint(
    arch: str,
    size: str,
    out_dir: str | os.PathLike[str],
    seed: int = 0,
    *,
    overwrite: bool = False,
) -> Path:
    """Write a random-weight checkpoint of ``arch`` at ``size`` into ``out_dir`` and return it.

    ``arch``: ``qwen3_vl`` | ``qwen3_vl_moe`` | ``llava_onevision``; ``size``: ``tiny`` | ``bench``.
    The same ``seed`` gives bit-identical weights. The folder is built beside ``out_dir`` and
    renamed into place, so a failure never leaves a half-written checkpoint. An existing non-empty
    ``out_dir`` raises ``FileExistsError`` unless ``overwrite`` is true.
    """
    _validate(arch, size)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    out = Path(out_dir).expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (pass overwrite=True to replace it)")
    with folder_in_place(out) as tmp:
        model, processor = build(arch, size, seed)
        n_params = sum(p.numel() for p in model.parameters())
        logger.info("built %s/%s (seed %d): %.2f M parameters", arch, size, seed, n_params / 1e6)
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
    logger.info("wrote %s", out)
    return out
