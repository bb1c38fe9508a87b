"""What the Qwen families' tiny-checkpoint builders share (``vcast/families/<name>/tiny.py``): the
vision token ids of a config, the generation config, and the processor of the 16 px ViT with
timestamped temporal patches (transformers' ``Qwen3VLProcessor``, which two families use)."""

from __future__ import annotations

from typing import Any, Mapping

# The published processors' values of the 16 px ViT: 2-frame temporal patches, 2x2 merge, mean/std 0.5.
TIMESTAMPED_PROCESSOR = dict(patch_size=16, temporal_patch_size=2, merge_size=2,
                             image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])


def vision_token_ids(ids: Mapping[str, int]) -> dict[str, Any]:
    """The model config's vision token ids from the tokenizer's special-token ids (untied embeddings)."""
    return dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
                tie_word_embeddings=False)


def generation_config(ids: Mapping[str, int], bos: bool = True) -> Any:
    """Greedy, ending at ``<|im_end|>`` or ``<|endoftext|>`` (padding with the latter)."""
    from transformers import GenerationConfig

    return GenerationConfig(**({"bos_token_id": ids["<|endoftext|>"]} if bos else {}),
                            eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
                            pad_token_id=ids["<|endoftext|>"], do_sample=False)


def timestamped_processor(tokenizer: Any, chat_template: str, image_size: Mapping[str, int],
                          video_size: Mapping[str, int]) -> Any:
    """The published processor values (fps 2, 4..768 frames, frames sampled by the processor unless
    told otherwise, the uncapped pixel budget the released configs get), with the given pixel budgets."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    image_processor = Qwen2VLImageProcessor(size=dict(image_size), **TIMESTAMPED_PROCESSOR)
    video_processor = Qwen3VLVideoProcessor(size=dict(video_size), fps=2, min_frames=4, max_frames=768,
                                            do_sample_frames=True, cap_pixels_per_frame=False, **TIMESTAMPED_PROCESSOR)
    return Qwen3VLProcessor(image_processor=image_processor, tokenizer=tokenizer, video_processor=video_processor,
                            chat_template=chat_template)
