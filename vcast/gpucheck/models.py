"""Random-weight models at the published sizes, and video prompts built directly as tensors.

Timing does not depend on the weights once the token counts are fixed: every method here keeps a
fixed share of the video tokens (or, in the LLM, drops a fixed number at fixed layers), so the
vision encoder, the LLM prefill and each decoding step do the same work with random weights as
with the released ones. So the efficiency table needs no download: the model is built from a
config with the published hyper-parameters, directly on the device, in bf16.

The prompt is built as tensors too (no processor, no video decode): ``input_ids`` laid out as the
model's processor lays out one video, by the family's ``kit_prompt`` (``vcast/families/<name>/kit.py``,
made of the builders here): Qwen3-VL and Qwen3.5 a ``<t seconds>`` timestamp of 6 text tokens,
``<|vision_start|>``, the frame's video tokens and ``<|vision_end|>`` per temporal patch; Qwen2.5-VL
one ``<|vision_start|>``, all the video's tokens and ``<|vision_end|>``, with its seconds per
temporal patch; LLaVA-OneVision one run of ``<video>`` tokens, the trailing newline included. It is
wrapped in a chat-like text of 38 tokens, and the pixels have the right shape: two "scenes" (a cut
half-way), each a random image plus a little noise per frame, so neighbouring frames are alike as
in a video. The text tokens are stand-ins (ids in the ASCII byte range, ordinary text tokens in
every vocabulary used here): only their number matters for timing.

``size``: ``"real"`` (each family's published config, its ``real_size`` module: Qwen3-VL-8B-Instruct,
LLaVA-OneVision-Qwen2-7B, ...) or ``"tiny"`` (the same configs with the tiny checkpoints' widths and
depths, :func:`vcast.tiny_checkpoints.checkpoint_spec`; the kit's CPU mode).
"""

from __future__ import annotations

import importlib
import math
from typing import Any, Optional

import torch

from vcast.families import family_for_arch, family_of, published_models

SIZES = ("real", "tiny")
PAPER_FAMILIES = ("qwen3_vl", "llava_onevision")  # measured by the kit's own parts (the paper's tables)

TEXT_BEFORE, TEXT_AFTER, TIMESTAMP_TOKENS = 14, 24, 6  # stand-in text around the video; "<t seconds>"
_TEXT_IDS = (32, 127)  # printable ASCII: byte tokens in every tokenizer used here


def _check_size(size: str) -> None:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {SIZES}")


def other_published_models() -> tuple[tuple[Any, Any], ...]:
    """``(family, published model)`` of every released checkpoint beyond the paper's families, whose
    efficiency rows the kit measures after the paper's."""
    return tuple((family, model) for family, model in published_models() if family.name not in PAPER_FAMILIES)


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


def weight_bytes(config: Any, dtype: torch.dtype) -> int:
    """Bytes of the model's weights in ``dtype``, counted on the meta device (nothing allocated)."""
    import transformers

    model_class = getattr(transformers, family_of(config).hf_class(config.model_type))
    with torch.device("meta"):
        model = model_class._from_config(config, dtype=dtype)
    return sum(p.numel() for p in model.parameters()) * torch.empty((), dtype=dtype).element_size()


def does_not_fit(config: Any, device: torch.device, dtype: torch.dtype, headroom: float = 0.85) -> Optional[str]:
    """Why a random model of ``config`` would not fit on ``device`` (its weights above ``headroom`` of
    the free memory, leaving the rest to activations and the cache), or None; the CPU always fits."""
    if device.type != "cuda":
        return None
    need = weight_bytes(config, dtype)
    free, _ = torch.cuda.mem_get_info(device)
    if need <= headroom * free:
        return None
    return (f"its weights need {need / 2**30:.1f} GiB in {str(dtype).removeprefix('torch.')}, above "
            f"{headroom:.0%} of the {free / 2**30:.1f} GiB free on {device}")


def fitting_side(config: Any, side: int) -> int:
    """The frame side the family's prompt takes nearest below ``side`` px: a multiple of the merged
    patch (patch x merge: 32 px for Qwen3-VL, 28 px for Qwen2.5-VL), or a fixed-size tower's own."""
    vision = config.vision_config
    if family_of(config).fixed_resolution:
        return int(vision.image_size)
    unit = vision.patch_size * vision.spatial_merge_size
    return max(unit, side // unit * unit)


def video_tokens(config: Any, frames: int, side: int) -> int:
    """Video placeholder tokens of one ``frames``-frame clip of ``side`` px in the family's prompt
    (LLaVA: its tower's size, the trailing newline included)."""
    inputs = video_inputs(config, frames, side, torch.device("cpu"), torch.float32)
    return int((inputs["input_ids"] == _video_token_id(config)).sum())


def _video_token_id(config: Any) -> int:
    token = getattr(config, "video_token_id", None)
    return int(token if token is not None else config.video_token_index)


def video_inputs(config: Any, frames: int, side: int, device: torch.device, dtype: torch.dtype,
                 seed: int = 0) -> dict[str, torch.Tensor]:
    """One prompt with one ``frames``-frame video of ``side`` x ``side`` px, as ``generate`` takes it,
    laid out by the family's ``kit_prompt`` (:attr:`vcast.families.family.Family.kit_prompt`).

    Patch-based towers (the Qwen families): ``frames`` a multiple of the temporal patch and ``side``
    of the merged patch (32 px): 448 px gives 28 x 28 patches, 14 x 14 = 196 tokens per temporal
    patch, and ``video_grid_thw`` ``[[frames / 2, 28, 28]]``. Fixed-size towers (LLaVA-OneVision):
    frames of the tower's input size (the tower has learned position embeddings for one size).
    """
    generator = torch.Generator().manual_seed(seed)
    inputs = family_of(config).load("kit_prompt")(config, frames, side, generator)
    return {key: value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
            for key, value in inputs.items()}


def stand_in_text(n: int, generator: torch.Generator) -> list[int]:
    """``n`` stand-in text token ids (printable ASCII bytes)."""
    return torch.randint(*_TEXT_IDS, (n,), generator=generator).tolist()


def scenes(frames: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """``[frames, *shape]`` in [-1, 1]: a scene cut half-way, a little noise per frame."""
    cut = max(1, frames // 2)
    bases = torch.rand((2, *shape), generator=generator) * 2 - 1
    scene = torch.tensor([0 if t < cut else 1 for t in range(frames)])
    noisy = bases[scene] + 0.1 * torch.randn((frames, *shape), generator=generator)
    return noisy.clamp(-1, 1)


def patch_pixels(config: Any, frames: int, side: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A patch-based tower's video input: ``video_grid_thw`` ``[[T', H, W]]`` (patches) and the
    flattened patches ``[T' * H * W, C * temporal * patch^2]`` of two scenes."""
    vision = config.vision_config
    temporal, patch, merge = vision.temporal_patch_size, vision.patch_size, vision.spatial_merge_size
    if frames % temporal or side % (patch * merge):
        raise ValueError(f"{family_of(config).display}: frames must be a multiple of {temporal} and the side of "
                         f"{patch * merge} px, got {frames} frames of {side} px")
    steps, grid = frames // temporal, side // patch
    pixels = scenes(steps, (grid * grid, vision.in_channels * temporal * patch * patch), generator)
    return torch.tensor([[steps, grid, grid]]), pixels.reshape(steps * grid * grid, -1)


def merged_patch_prompt(config: Any, grid_thw: torch.Tensor, pixels: torch.Tensor, generator: torch.Generator,
                        timestamps: bool) -> dict[str, torch.Tensor]:
    """One prompt around one video of ``grid_thw`` ``[[T', H, W]]`` (patches) and its ``pixels``
    ``[T' * H * W, C * temporal * patch^2]``, in a merging tower's layout: stand-in text, then
    (``timestamps``) per temporal patch a stand-in ``<t seconds>``, ``<|vision_start|>``, ``H * W /
    merge^2`` video tokens and ``<|vision_end|>``, or (not) one ``<|vision_start|>``, all ``T' * H *
    W / merge^2`` video tokens and ``<|vision_end|>``. Tensors on the CPU, as ``generate`` takes them."""
    steps, height, width = (int(v) for v in grid_thw[0])
    per_step = height * width // config.vision_config.spatial_merge_size ** 2
    video = [config.video_token_id] * per_step
    ids = stand_in_text(TEXT_BEFORE, generator)
    if timestamps:
        for _ in range(steps):
            ids += stand_in_text(TIMESTAMP_TOKENS, generator) + [config.vision_start_token_id] + video
            ids += [config.vision_end_token_id]
    else:
        ids += [config.vision_start_token_id] + video * steps + [config.vision_end_token_id]
    ids += stand_in_text(TEXT_AFTER, generator)
    input_ids = torch.tensor([ids])
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "mm_token_type_ids": (input_ids == config.video_token_id).long() * 2,  # 0 text, 2 video
        "pixel_values_videos": pixels,
        "video_grid_thw": grid_thw,
    }


def tower_prompt(config: Any, frames: int, side: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One prompt with one video for a fixed-size tower that pools each frame 2 x 2 (LLaVA-OneVision):
    stand-in text, one run of ``frames * ceil(grid / 2)^2 + 1`` video tokens (the trailing newline
    included), stand-in text; pixels ``[1, frames, 3, side, side]``."""
    vision = config.vision_config
    if side != vision.image_size:
        raise ValueError(f"{family_of(config).display}: frames must be the tower's {vision.image_size} px, got {side}")
    pooled = math.ceil(vision.image_size // vision.patch_size / 2)
    ids = stand_in_text(TEXT_BEFORE, generator) + [config.video_token_index] * (frames * pooled * pooled + 1)
    input_ids = torch.tensor([ids + stand_in_text(TEXT_AFTER, generator)])
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "pixel_values_videos": scenes(frames, (3, side, side), generator)[None],
    }
