"""The GPU kit's prompt in this family's layout: per temporal patch a ``<t seconds>`` timestamp,
``<|vision_start|>``, the patch's video tokens and ``<|vision_end|>`` (as its processor writes a video)."""

from __future__ import annotations

from typing import Any

import torch

from vcast.gpucheck.models import merged_patch_prompt, patch_pixels


def video_prompt(config: Any, frames: int, side: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One ``frames``-frame video of ``side`` px (:func:`vcast.gpucheck.models.video_inputs`)."""
    grid_thw, pixels = patch_pixels(config, frames, side, generator)
    return merged_patch_prompt(config, grid_thw, pixels, generator, timestamps=True)
