"""Random-weight models at the published sizes, and video prompts built directly as tensors.

Timing does not depend on the weights once the token counts are fixed: every method here keeps a
fixed share of the video tokens (or, in the LLM, drops a fixed number at fixed layers), so the
vision encoder, the LLM prefill and each decoding step do the same work with random weights as
with the released ones. So the efficiency table needs no download: the model is built from a
config with the published hyper-parameters, directly on the device, in bf16.

The prompt is built as tensors too (no processor, no video decode): ``input_ids`` laid out as the
model's processor lays out one video (Qwen3-VL: a ``<t seconds>`` timestamp of 6 text tokens,
``<|vision_start|>``, the frame's video tokens and ``<|vision_end|>`` per temporal patch; LLaVA-
OneVision: one run of ``<video>`` tokens, the trailing newline included), wrapped in a chat-like
text of 38 tokens, and pixels of the right shape: two "scenes" (a cut half-way), each a random
image plus a little noise per frame, so neighbouring frames are alike as in a video. The text
tokens are stand-ins (ids in the ASCII byte range, ordinary text tokens in every vocabulary used
here): only their number matters for timing.

``size``: ``"real"`` (Qwen3-VL-8B-Instruct, LLaVA-OneVision-Qwen2-7B) or ``"tiny"`` (the same
configs with the tiny checkpoints' widths and depths,
:func:`vcast.tiny_checkpoints.checkpoint_spec`; the kit's CPU mode).
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import torch

from vcast.families import family_for_arch, family_of

SIZES = ("real", "tiny")

TEXT_BEFORE, TEXT_AFTER, TIMESTAMP_TOKENS = 14, 24, 6  # stand-in text around the video; "<t seconds>"
_TEXT_IDS = (32, 127)  # printable ASCII: byte tokens in every tokenizer used here


def _check_size(size: str) -> None:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {SIZES}")


def model_config(arch: str, size: str = "real") -> Any:
    """The transformers config of ``arch``'s published checkpoint (its family's ``real_size``
    module), or (``tiny``) with the tiny checkpoint's widths on it."""
    import transformers

    _check_size(size)
    family = family_for_arch(arch)
    sizes = importlib.import_module(family.real_size.partition(":")[0])
    spec = sizes.real_config(arch)
    if size == "tiny":
        if not hasattr(sizes, "tiny_widths"):
            raise ValueError(f"the GPU kit's CPU mode has no tiny widths for {arch!r} ({sizes.__name__}.tiny_widths)")
        spec = sizes.tiny_widths(spec, arch)
    model_type = family.model_types[family.archs.index(arch)]
    return transformers.AutoConfig.for_model(model_type, **spec)


def random_model(config: Any, device: torch.device, dtype: torch.dtype, seed: int = 0) -> Any:
    """The model of ``config`` with random weights, made directly on ``device`` in ``dtype``
    (nothing is built on the host first), SDPA attention, greedy generation config."""
    import transformers
    from transformers import GenerationConfig

    model_class = getattr(transformers, family_of(config).hf_class(config.model_type))
    torch.manual_seed(seed)
    with torch.device(device):
        model = model_class._from_config(config, dtype=dtype, attn_implementation="sdpa")
    text = config.text_config
    model.generation_config = GenerationConfig(bos_token_id=text.bos_token_id, eos_token_id=text.eos_token_id,
                                               pad_token_id=text.eos_token_id, do_sample=False)
    return model.eval()


def _is_qwen(config: Any) -> bool:
    return str(config.model_type).startswith("qwen3_vl")


def video_tokens(config: Any, frames: int, side: int) -> int:
    """Video placeholder tokens of one ``frames``-frame clip of ``side`` px (LLaVA: its tower's size,
    newline included)."""
    vision = config.vision_config
    if _is_qwen(config):
        grid = side // vision.patch_size // vision.spatial_merge_size
        return frames // vision.temporal_patch_size * grid * grid
    pooled = math.ceil(vision.image_size // vision.patch_size / 2)
    return frames * pooled * pooled + 1


def _scenes(frames: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """``[frames, *shape]`` in [-1, 1]: a scene cut half-way, a little noise per frame."""
    cut = max(1, frames // 2)
    bases = torch.rand((2, *shape), generator=generator) * 2 - 1
    scene = torch.tensor([0 if t < cut else 1 for t in range(frames)])
    noisy = bases[scene] + 0.1 * torch.randn((frames, *shape), generator=generator)
    return noisy.clamp(-1, 1)


def video_inputs(config: Any, frames: int, side: int, device: torch.device, dtype: torch.dtype,
                 seed: int = 0) -> dict[str, torch.Tensor]:
    """One prompt with one ``frames``-frame video of ``side`` x ``side`` px, as ``generate`` takes it.

    Qwen3-VL: ``frames`` must be a multiple of the temporal patch and ``side`` of the merged patch
    (32 px): 448 px gives 28 x 28 patches, 14 x 14 = 196 tokens per temporal patch, and
    ``video_grid_thw`` ``[[frames / 2, 28, 28]]``. LLaVA-OneVision: frames of the tower's input size
    (``side`` must be it: the tower has learned position embeddings for one size).
    """
    generator = torch.Generator().manual_seed(seed)

    def text(n: int) -> list[int]:
        return torch.randint(*_TEXT_IDS, (n,), generator=generator).tolist()

    vision = config.vision_config
    if _is_qwen(config):
        temporal, patch, merge = vision.temporal_patch_size, vision.patch_size, vision.spatial_merge_size
        if frames % temporal or side % (patch * merge):
            raise ValueError(f"Qwen3-VL: frames must be a multiple of {temporal} and the side of {patch * merge} px, "
                             f"got {frames} frames of {side} px")
        steps, grid = frames // temporal, side // patch
        pixels = _scenes(steps, (grid * grid, vision.in_channels * temporal * patch * patch), generator)
        inputs = qwen_video_prompt(config, torch.tensor([[steps, grid, grid]]), pixels.reshape(steps * grid * grid, -1),
                                   generator)
    else:
        if side != vision.image_size:
            raise ValueError(f"LLaVA-OneVision: frames must be the tower's {vision.image_size} px, got {side}")
        ids = text(TEXT_BEFORE) + [config.video_token_index] * video_tokens(config, frames, side) + text(TEXT_AFTER)
        input_ids = torch.tensor([ids])
        inputs = {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "pixel_values_videos": _scenes(frames, (3, side, side), generator)[None],
        }
    return {key: value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
            for key, value in inputs.items()}


def qwen_video_prompt(config: Any, grid_thw: torch.Tensor, pixels: torch.Tensor,
                      generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One Qwen3-VL prompt around one video of ``grid_thw`` ``[[T', H, W]]`` (patches) and its
    ``pixels`` ``[T' * H * W, C * temporal * patch^2]``: stand-in text, then per temporal patch a
    stand-in timestamp, ``<|vision_start|>``, ``H * W / merge^2`` video tokens, ``<|vision_end|>``.
    Tensors on the CPU, as ``generate`` takes them."""
    steps, height, width = (int(v) for v in grid_thw[0])
    per_step = height * width // config.vision_config.spatial_merge_size ** 2

    def text(n: int) -> list[int]:
        return torch.randint(*_TEXT_IDS, (n,), generator=generator).tolist()

    ids = text(TEXT_BEFORE)
    for _ in range(steps):
        ids += text(TIMESTAMP_TOKENS) + [config.vision_start_token_id] + [config.video_token_id] * per_step
        ids += [config.vision_end_token_id]
    ids += text(TEXT_AFTER)
    input_ids = torch.tensor([ids])
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "mm_token_type_ids": (input_ids == config.video_token_id).long() * 2,  # 0 text, 2 video
        "pixel_values_videos": pixels,
        "video_grid_thw": grid_thw,
    }
