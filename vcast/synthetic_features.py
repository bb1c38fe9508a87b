"""Video-like token features with known events, for demos, benchmarks and tests.

Each scene has its own base direction; frames drift slowly along a fixed direction inside a
scene (a smooth trajectory: low curvature); a scene cut jumps to a new base; a brief event
adds an "object" vector to a block of tokens for a few frames. Fully determined by the seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SyntheticVideo:
    """``features`` [T, P, D] and where the planted events are (frame indices)."""

    features: torch.Tensor
    scene_cuts: tuple[int, ...]
    event_frames: tuple[int, ...]
    event_tokens: tuple[int, ...]


def synthetic_video_features(
    num_frames: int = 24,
    tokens_per_frame: int = 64,
    dim: int = 128,
    scene_cuts: tuple[int, ...] = (16,),
    event_start: int = 7,
    event_length: int = 2,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> SyntheticVideo:
    """Build a synthetic video's token features.

    Args:
        num_frames, tokens_per_frame, dim: ``T``, ``P``, ``D``.
        scene_cuts: first frame of each new scene.
        event_start, event_length: frames ``[event_start, event_start + event_length)`` show the
            object, on the first quarter of the tokens (``event_length = 0``: no event).
        seed: everything random comes from ``torch.Generator().manual_seed(seed)``.
        dtype: dtype of the returned features.
    """
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    num_scenes = len(scene_cuts) + 1
    bases = 4.0 * randn(num_scenes, dim)
    drifts = 0.15 * randn(num_scenes, dim)
    layouts = randn(num_scenes, tokens_per_frame, dim)  # spatial pattern of each scene
    scene_of_frame = torch.bucketize(torch.arange(num_frames), torch.tensor(scene_cuts), right=True)
    first_frame = torch.tensor((0, *scene_cuts))[scene_of_frame]
    steps = (torch.arange(num_frames) - first_frame).float()
    features = (
        bases[scene_of_frame, None, :]
        + steps[:, None, None] * drifts[scene_of_frame, None, :]
        + layouts[scene_of_frame]
        + 0.1 * randn(num_frames, tokens_per_frame, dim)
    )
    event_frames = tuple(range(event_start, min(event_start + event_length, num_frames)))
    event_tokens = tuple(range(max(1, tokens_per_frame // 4)))
    if event_frames:
        obj = 6.0 * randn(dim)
        index_t = torch.tensor(event_frames)[:, None]
        index_p = torch.tensor(event_tokens)[None, :]
        features[index_t, index_p] += obj
    return SyntheticVideo(
        features=features.to(dtype),
        scene_cuts=tuple(c for c in scene_cuts if c < num_frames),
        event_frames=event_frames,
        event_tokens=event_tokens,
    )
