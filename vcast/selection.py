"""The result of a token compressor: which video tokens survive, and how many per frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass(frozen=True)
class Selection:
    """Which of the ``T * P`` video tokens of one video are kept.

    Attributes:
        keep: LongTensor ``[K]``, ascending, unique flat indices into the ``T * P`` tokens
            (token ``i`` of frame ``t`` is ``t * P + i``). ``K == int(budgets.sum())``.
        budgets: LongTensor ``[T]``, tokens kept per frame.
        tokens_per_frame: ``P``, so that flat indices can be turned back into ``(t, i)``.
        frame_weights: FloatTensor ``[T]`` or None: the temporal density ``p`` the budgets
            were apportioned from (diagnostics, budget-profile figures).
    """

    keep: torch.Tensor
    budgets: torch.Tensor
    tokens_per_frame: int
    frame_weights: Optional[torch.Tensor] = None

    @property
    def num_frames(self) -> int:
        """``T``."""
        return int(self.budgets.numel())

    def mask(self) -> torch.Tensor:
        """BoolTensor ``[T, P]``: True where the token is kept."""
        flat = torch.zeros(
            self.num_frames * self.tokens_per_frame, dtype=torch.bool, device=self.keep.device
        )
        flat[self.keep] = True
        return flat.view(self.num_frames, self.tokens_per_frame)

    def gather(self, frames: torch.Tensor) -> torch.Tensor:
        """Kept tokens in original order: ``frames [T, P, D]`` -> ``[K, D]``."""
        return frames.reshape(-1, frames.shape[-1]).index_select(0, self.keep)
