"""The GPU kit's prompt in this family's layout: one run of ``<video>`` tokens, every frame pooled
2 x 2 and one newline after the video, pixels at the tower's one input size."""

from __future__ import annotations

from typing import Any

import torch

from vcast.gpucheck.models import tower_prompt


def video_prompt(config: Any, frames: int, side: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One ``frames``-frame video of ``side`` px (:func:`vcast.gpucheck.models.video_inputs`)."""
    return tower_prompt(config, frames, side, generator)
