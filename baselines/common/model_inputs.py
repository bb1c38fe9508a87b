"""Checks of the model inputs a baseline declares (``vision_attention``, ``vision_keys``).

Registers nothing. Each check raises a ValueError naming the input: missing, not a float
tensor, not shaped like ``frames``, or not finite; and returns it as float32 on the video's device.
"""

from __future__ import annotations

from typing import Any

import torch


def _float_tensor(name: str, value: Any, layout: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        dtype = f" of dtype {value.dtype}" if isinstance(value, torch.Tensor) else ""
        raise ValueError(f"{name} must be a float tensor {layout}, got {type(value).__name__}{dtype}")
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} contains non-finite values (NaN or Inf)")
    return value


def vision_attention_input(method: str, value: Any, num_frames: int, tokens_per_frame: int,
                           device: torch.device) -> torch.Tensor:
    """``vision_attention`` [T, P] as float32 on ``device``."""
    if value is None:
        raise ValueError(f"{method} needs vision_attention [T, P] (the vision encoder's attention per token; "
                         "the model adapters supply it); got None")
    if isinstance(value, torch.Tensor) and tuple(value.shape) != (num_frames, tokens_per_frame):
        raise ValueError(f"vision_attention must be [T, P] = [{num_frames}, {tokens_per_frame}] like frames, "
                         f"got shape {tuple(value.shape)}")
    return _float_tensor("vision_attention", value, "[T, P]").to(device=device, dtype=torch.float32)


def vision_keys_input(value: Any, num_frames: int, tokens_per_frame: int, device: torch.device) -> torch.Tensor:
    """``vision_keys`` [T, P, d] (d > 0) as float32 on ``device``."""
    if isinstance(value, torch.Tensor) and (value.dim() != 3 or tuple(value.shape[:2]) != (num_frames, tokens_per_frame)
                                            or value.shape[2] == 0):
        raise ValueError(f"vision_keys must be [T, P, d] = [{num_frames}, {tokens_per_frame}, d>0] like frames, "
                         f"got shape {tuple(value.shape)}")
    return _float_tensor("vision_keys", value, "[T, P, d]").to(device=device, dtype=torch.float32)
