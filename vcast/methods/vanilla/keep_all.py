"""The selection that keeps every token of a video (``method="vanilla"``)."""

from __future__ import annotations

import torch

from vcast.selection import Selection


def all_tokens(frames: torch.Tensor) -> Selection:
    """All ``T * P`` tokens of ``frames`` [T, P, D], every frame whole."""
    num_frames, tokens_per_frame, _ = frames.shape
    keep = torch.arange(num_frames * tokens_per_frame, device=frames.device)
    budgets = torch.full((num_frames,), tokens_per_frame, dtype=torch.long, device=frames.device)
    return Selection(keep=keep, budgets=budgets, tokens_per_frame=tokens_per_frame)
