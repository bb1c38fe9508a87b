"""One streaming pass over the video tokens for everything V-CAST's scores need.

The pass walks blocks of whole frames; each block is upcast into one reused float32 buffer, so
a bf16 input never needs a full float32 copy. On CPU a block is cache-sized (large fresh allocations cost more in
page faults than the arithmetic); on CUDA a block holds up to 2**28 elements, so a video is
almost always one block.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CPU_BLOCK_ELEMENTS = 1 << 21
CUDA_BLOCK_ELEMENTS = 1 << 28


@dataclass(frozen=True)
class FrameStats:
    """Float32 statistics of ``frames`` [T, P, D].

    Attributes:
        means: [T, D] per-frame mean token ``x_bar_t``.
        norms: [T, P] token norms ``|x_ti|``.
        dots: [T, P] ``x_ti . x_bar_t``.
    """

    means: torch.Tensor
    norms: torch.Tensor
    dots: torch.Tensor


def block_frames(frames: torch.Tensor, block_elements: int | None = None) -> int:
    """How many whole frames of ``frames`` [T, P, D] go in one block."""
    if block_elements is None:
        block_elements = CUDA_BLOCK_ELEMENTS if frames.is_cuda else CPU_BLOCK_ELEMENTS
    per_frame = frames.shape[1] * frames.shape[2]
    return max(1, block_elements // per_frame)


def frame_stats(frames: torch.Tensor, block_elements: int | None = None) -> FrameStats:
    """Means, norms and mean-dots of ``frames`` [T, P, D] (any float dtype), in float32."""
    num_frames, tokens_per_frame, dim = frames.shape
    step = block_frames(frames, block_elements)
    device = frames.device
    means = torch.empty(num_frames, dim, device=device)
    norms = torch.empty(num_frames, tokens_per_frame, device=device)
    dots = torch.empty(num_frames, tokens_per_frame, device=device)
    averager = torch.full((1, 1, tokens_per_frame), 1.0 / tokens_per_frame, device=device)
    # One float32 buffer reused by every block: fresh multi-MB allocations per block cost more
    # (page faults on CPU) than the arithmetic.
    buffer = None if frames.dtype == torch.float32 else torch.empty(min(step, num_frames), tokens_per_frame, dim, device=device)
    for start in range(0, num_frames, step):
        chunk = frames[start : start + step]
        block = chunk if buffer is None else buffer[: chunk.shape[0]].copy_(chunk)  # [b, P, D]
        block_means = torch.bmm(averager.expand(block.shape[0], -1, -1), block)  # [b, 1, D]
        means[start : start + step] = block_means.squeeze(1)
        norms[start : start + step] = torch.linalg.vector_norm(block, dim=-1)
        dots[start : start + step] = torch.bmm(block_means, block.transpose(1, 2)).squeeze(1)
    return FrameStats(means=means, norms=norms, dots=dots)
