"""What one compressed call did: tokens kept per video, budgets, timings, peak memory."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import torch


@dataclass(frozen=True)
class SegmentStats:
    """One compressed video (or image, when images are compressed) of one sample.

    Attributes:
        sample: row of the batch it belongs to.
        kind: ``"video"`` or ``"image"``.
        frames: ``T`` (temporal patches for Qwen3-VL, frames for LLaVA).
        tokens_per_frame: ``P``.
        total: ``T * P`` tokens before pruning.
        kept: tokens kept.
        budgets: tokens kept per frame, length ``T``.
        keep: LongTensor ``[kept]`` (CPU): ascending flat indices into the ``T * P`` tokens.
        positions: LongTensor ``[T * P]`` (CPU): the sequence column of each token of the video
            in the unpruned prompt, so ``positions[keep]`` are the kept tokens' columns.
        merged: whether the kept positions hold merged tokens (a merging method) rather than
            the originals.
    """

    sample: int
    kind: str
    frames: int
    tokens_per_frame: int
    total: int
    kept: int
    budgets: list[int]
    keep: torch.Tensor
    positions: torch.Tensor
    merged: bool = False


@dataclass(frozen=True)
class CallStats:
    """The last compressed ``forward``/``generate`` call.

    Times are seconds (CUDA events on GPU, ``perf_counter`` on CPU; see ``timer``):
    ``vision_s`` the vision encoder (ViT + merger / projector), ``selection_s`` finding the
    video tokens, selecting and re-laying the sequence, ``prefill_s`` the language model's
    prefill on the pruned sequence, ``decode_s`` all decoding steps (``decode_steps`` of them).
    ``peak_memory_bytes`` is over the whole call; ``memory_source`` says what it measured.
    ``tokens_before`` / ``tokens_after`` are the real (unpadded) prompt lengths per sample.
    """

    method: str
    ratio: float
    segments: list[SegmentStats]
    tokens_before: list[int]
    tokens_after: list[int]
    vision_s: float
    selection_s: float
    prefill_s: float
    decode_s: float
    decode_steps: int
    peak_memory_bytes: Optional[int]
    memory_source: str
    timer: str
    pruned: bool = field(default=False)

    @property
    def videos(self) -> list[SegmentStats]:
        return [s for s in self.segments if s.kind == "video"]

    @property
    def kept_video_tokens(self) -> int:
        return sum(s.kept for s in self.videos)

    @property
    def total_video_tokens(self) -> int:
        return sum(s.total for s in self.videos)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: tensors become lists."""
        out = asdict(self)
        for segment in out["segments"]:
            segment["keep"] = segment["keep"].tolist()
            segment["positions"] = segment["positions"].tolist()
        out.update(kept_video_tokens=self.kept_video_tokens, total_video_tokens=self.total_video_tokens)
        return out
