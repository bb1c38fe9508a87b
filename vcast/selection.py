"""The result of a token compressor: which video tokens survive, and how many per frame.

A pruning method only chooses positions. A merging method also returns the output tokens:
``tokens[k]`` is written at flat position ``keep[k]`` (its representative's on-grid place, e.g.
the (t, h, w) of a cluster centre for Qwen3-VL), and every position not in ``keep`` is dropped.
"""

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
        tokens: ``[K, D]`` or None. None for pruning (the kept tokens are the input's own);
            for merging, the output tokens, row ``k`` taking position ``keep[k]``.
    """

    keep: torch.Tensor
    budgets: torch.Tensor
    tokens_per_frame: int
    frame_weights: Optional[torch.Tensor] = None
    tokens: Optional[torch.Tensor] = None

    def __post_init__(self) -> None:
        if self.tokens is not None and (self.tokens.dim() != 2 or self.tokens.shape[0] != self.keep.numel()):
            raise ValueError(f"Selection.tokens must be [K, D] with K = len(keep) = {self.keep.numel()}, "
                             f"got shape {tuple(self.tokens.shape)}")

    @property
    def merges(self) -> bool:
        """Whether the output tokens differ from the input's own (a merging method)."""
        return self.tokens is not None

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
        """Kept tokens in original order: ``frames [T, P, D]`` -> ``[K, D]`` (the input's own rows)."""
        return frames.reshape(-1, frames.shape[-1]).index_select(0, self.keep)

    def output(self, frames: torch.Tensor) -> torch.Tensor:
        """What the LLM receives, ``[K, D]`` in ``frames``' dtype: the merged tokens, or the kept rows."""
        if self.tokens is None:
            return self.gather(frames)
        return self.tokens.to(frames.device, frames.dtype)
