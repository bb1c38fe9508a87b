"""Video reading for the lmms-eval plugins: decord, pinned, with each wrapper's frame sampling.

lmms-eval's Qwen3-VL wrapper reads through ``qwen_vl_utils``, whose backend depends on what
happens to be installed (torchcodec first) and silently falls back to torchvision when decord
fails. We always read with decord (the backend lmms-eval's wrappers import) and let errors
surface, so a result never depends on the environment and a bad video fails its cell loudly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

logger = logging.getLogger(__name__)

VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".mpeg", ".mpg")


def is_video_path(value: object) -> bool:
    return isinstance(value, str) and value.lower().endswith(VIDEO_EXTENSIONS)


@dataclass(frozen=True)
class DecodedVideo:
    """``frames`` uint8 ``[T, H, W, 3]`` read at ``indices`` (length T) of a video with
    ``total_frames`` frames at ``fps``."""

    frames: np.ndarray
    indices: list[int]
    total_frames: int
    fps: float


class MissingVideo(FileNotFoundError):
    """A benchmark item's video file does not exist."""


class UndecodableVideo(ValueError):
    """A benchmark item's video exists but cannot be decoded."""


UNREADABLE_VIDEO = (MissingVideo, UndecodableVideo)


def _reader(path: str):
    import decord

    if not Path(path).is_file():
        raise MissingVideo(f"video not found: {path}")
    try:
        return decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
    except Exception as error:  # decord raises its own DECORDError
        raise UndecodableVideo(f"cannot decode video {path}: {error}") from error


def pick_codec() -> str:
    """libx264 where this PyAV build can encode it, else mpeg4 (both decodable by decord)."""
    import av

    try:
        av.codec.Codec("libx264", "w")
        return "libx264"
    except Exception:  # noqa: BLE001 - PyAV raises several types for an unknown encoder
        return "mpeg4"


def write_mp4(path: Path, frames: np.ndarray, fps: int, codec: str | None = None) -> None:
    """Encode uint8 RGB ``frames`` [T, H, W, 3] as a yuv420p mp4 at ``fps`` with PyAV.

    libx264 at crf 10 (near-lossless, so colours and fine patterns survive) or mpeg4 at 4 Mb/s;
    one encoder thread, because x264's output depends on its thread count.
    """
    import av

    codec = codec or pick_codec()
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.height, stream.width = frames.shape[1:3]
        stream.pix_fmt = "yuv420p"
        stream.codec_context.thread_count = 1
        if codec == "libx264":
            stream.options = {"crf": "10", "preset": "medium"}
        else:
            stream.bit_rate = 4_000_000
        for rgb in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            container.mux(stream.encode(frame.reformat(format="yuv420p")))
        container.mux(stream.encode())  # flush


def qwen_frame_count(requested: int, available: int, factor: int = 2) -> int:
    """Frames Qwen3-VL reads: ``requested`` capped to the video, rounded DOWN to a multiple of
    ``factor`` (the temporal patch), so a video shorter than ``requested`` still works.

    lmms-eval caps with ``min(requested, available)`` and then ``qwen_vl_utils`` rounds half to
    even, which gives 32 > 31 for a 31-frame video and raises; the V-CAST fork rounds down too.
    """
    if requested < factor:
        raise ValueError(f"max_num_frames must be >= {factor} for Qwen3-VL, got {requested}")
    count = (min(requested, available) // factor) * factor
    if count < factor:
        raise ValueError(f"the video has {available} frame(s); Qwen3-VL needs at least {factor}")
    return count


def _frames(reader, indices: list[int], path: str) -> np.ndarray:
    """uint8 ``[T, H, W, 3]`` at ``indices``; a file that opens but fails mid-way is undecodable."""
    try:
        return reader.get_batch(indices).asnumpy()
    except Exception as error:  # decord raises its own DECORDError
        raise UndecodableVideo(f"cannot decode video {path} at frames {indices[:4]}...: {error}") from error


def read_qwen_video(path: str, max_num_frames: int) -> DecodedVideo:
    """``qwen_vl_utils``' decord reader with ``nframes``: ``linspace(0, N-1, n).round()``."""
    reader = _reader(path)
    total, fps = len(reader), float(reader.get_avg_fps())
    count = qwen_frame_count(max_num_frames, total)
    indices = torch.linspace(0, total - 1, count).round().long().tolist()
    frames = _frames(reader, indices, path)
    logger.debug("read %s: %d of %d frames at %.3g fps", path, count, total, fps)
    return DecodedVideo(frames=frames, indices=indices, total_frames=total, fps=fps)


def read_llava_video(path: str, max_frames_num: int) -> DecodedVideo:
    """lmms-eval's LLaVA readers: ``np.linspace(0, N-1, n, dtype=int)`` (frames repeat when the
    video is shorter than ``n``, exactly as there)."""
    if max_frames_num < 1:
        raise ValueError(f"max_num_frames must be >= 1, got {max_frames_num}")
    reader = _reader(path)
    total, fps = len(reader), float(reader.get_avg_fps())
    if total < 1:
        raise UndecodableVideo(f"the video {path} has no frames")
    indices = np.linspace(0, total - 1, max_frames_num, dtype=int).tolist()
    frames = _frames(reader, indices, path)
    return DecodedVideo(frames=frames, indices=indices, total_frames=total, fps=fps)


def qwen_resize(frames: np.ndarray, min_pixels: int, max_pixels: int, total_pixels: int | None = None,
                patch_size: int = 16) -> torch.Tensor:
    """``qwen_vl_utils.fetch_video``'s resize: uint8 ``[T, H, W, 3]`` -> float ``[T, 3, H', W']``.

    H', W' are multiples of ``2 * patch_size``; the per-frame pixel cap is
    ``min(max_pixels, 768 * 32^2, total_pixels / T * 2)`` (never below ``1.05 * min_pixels``),
    bicubic with antialiasing, as there.
    """
    from qwen_vl_utils.vision_process import (
        FRAME_FACTOR,
        MODEL_SEQ_LEN,
        SPATIAL_MERGE_SIZE,
        VIDEO_MAX_TOKEN_NUM,
        smart_resize,
    )
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F

    factor = patch_size * SPATIAL_MERGE_SIZE
    video = torch.from_numpy(frames).permute(0, 3, 1, 2)
    count, _, height, width = video.shape
    if total_pixels is None:
        total_pixels = MODEL_SEQ_LEN * factor * factor * 0.9
    cap = max(min(VIDEO_MAX_TOKEN_NUM * factor * factor, total_pixels / count * FRAME_FACTOR),
              int(min_pixels * 1.05))
    cap = min(max_pixels, cap)
    new_h, new_w = smart_resize(height, width, factor=factor, min_pixels=min_pixels, max_pixels=cap)
    return F.resize(video, [new_h, new_w], interpolation=InterpolationMode.BICUBIC, antialias=True).float()
