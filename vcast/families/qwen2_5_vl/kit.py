"""The GPU kit's prompt in this family's layout: one ``<|vision_start|>``, all the video's tokens
and ``<|vision_end|>`` (no timestamps: Qwen2.5-VL's temporal MRoPE is absolute time, from the
seconds per temporal patch; Qwen2-VL's is the temporal patch's index)."""

from __future__ import annotations

from typing import Any

import torch

from vcast.families.qwen2_5_vl import arch_traits
from vcast.gpucheck.models import merged_patch_prompt, patch_pixels

FPS = 2.0  # the processor's default sampling rate: a temporal patch of 2 frames spans 1 s


def video_prompt(config: Any, frames: int, side: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One ``frames``-frame video of ``side`` px (:func:`vcast.gpucheck.models.video_inputs`), with
    (absolute time) ``second_per_grid_ts`` ``[1]`` = temporal patch / fps."""
    grid_thw, pixels = patch_pixels(config, frames, side, generator)
    inputs = merged_patch_prompt(config, grid_thw, pixels, generator, timestamps=False)
    if arch_traits(config.model_type).absolute_time:
        inputs["second_per_grid_ts"] = torch.tensor([config.vision_config.temporal_patch_size / FPS])
    return inputs
