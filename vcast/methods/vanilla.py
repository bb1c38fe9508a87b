"""``method="vanilla"``: keep every token. The unpruned baseline run through the same code path
(same hooks, same meters), so its efficiency figures are measured exactly like the methods'."""

from __future__ import annotations

import torch

from vcast.registry import register_method
from vcast.selection import Selection


@register_method("vanilla")
def keep_all(frames: torch.Tensor, ratio: float) -> Selection:
    """All ``T * P`` tokens of ``frames`` [T, P, D]; ``ratio`` must be 1 (nothing is pruned)."""
    if ratio != 1.0:
        raise ValueError(f"method 'vanilla' keeps every token, so ratio must be 1.0, got {ratio!r}")
    num_frames, tokens_per_frame, _ = frames.shape
    keep = torch.arange(num_frames * tokens_per_frame, device=frames.device)
    budgets = torch.full((num_frames,), tokens_per_frame, dtype=torch.long, device=frames.device)
    return Selection(keep=keep, budgets=budgets, tokens_per_frame=tokens_per_frame)
