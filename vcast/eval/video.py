"""Video reading for the lmms-eval plugins: pinned readers, with each wrapper's frame sampling.

lmms-eval's Qwen3-VL wrapper reads through ``qwen_vl_utils``, whose backend depends on what
happens to be installed (torchcodec first) and silently falls back to torchvision when decord
fails. We always read video files with decord (the backend lmms-eval's wrappers import) and let
errors surface, so a result never depends on the environment and a bad video fails its item
loudly. Where decord's seeking is wrong (files whose frames carry no timestamps) we decode in order.

The upstream MVBench release also has what decord cannot read: animated GIFs (decord 0.6 fails
with "broken metadata") and folders of frames (TVQA's ``frames_fps3_hq``: ``00001.jpg``, ...).
Those are read with PIL and sampled at the same indices as a video file of as many frames, so
each wrapper's sampling is unchanged. Anything else is refused by name (:class:`UndecodableVideo`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

logger = logging.getLogger(__name__)

# Containers decord 0.6 reads here, each checked on a real file in tests/test_eval_video_formats.py
# (not .ts: decord fails at its end; nor AV1 streams, which its FFmpeg cannot decode).
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".mpeg", ".mpg", ".m4v", ".3gp", ".flv", ".wmv")
# decord seeks by frame timestamps; where a file has none (MPEG program streams, H.264 in AVI) its
# seeks land on wrong frames, silently (always, or at random): such files are read in order. A
# missing timestamp reads as AV_NOPTS_VALUE in the stream's time base, hugely negative.
NO_TIMESTAMP_S = -1e9
GIF_EXTENSIONS = (".gif",)
FRAME_EXTENSIONS = (".jpg", ".jpeg", ".png")
# A frame folder has no frame rate of its own; MVBench's (TVQA, episodic_reasoning) is 3 fps.
FRAME_FOLDER_FPS = 3.0
# Browsers play a GIF frame delay of 10 ms or less as 100 ms; so it counts here.
GIF_MIN_DELAY_MS, GIF_DEFAULT_DELAY_MS = 10, 100
SUPPORTED_FORMATS = (f"video files ({' '.join(VIDEO_EXTENSIONS)}), animated GIFs (.gif), or a folder of frames "
                     f"({' '.join(FRAME_EXTENSIONS)}, in numeric name order, {FRAME_FOLDER_FPS:g} fps)")


def is_video_path(value: object) -> bool:
    """Whether a visual from a task's ``doc_to_visual`` is a video to read: any string.

    lmms-eval hands images as PIL images and videos as paths, and a path may be a frame folder
    (no extension) or missing. Every string therefore goes to :func:`open_video`, which reads it
    or raises :class:`MissingVideo` / :class:`UndecodableVideo` naming it (recorded per item by
    the plugins), instead of being dropped or failing the whole cell as an unknown visual.
    """
    return isinstance(value, str)


@dataclass(frozen=True)
class DecodedVideo:
    """``frames`` uint8 ``[T, H, W, 3]`` read at ``indices`` (length T) of a video with
    ``total_frames`` frames at ``fps``."""

    frames: np.ndarray
    indices: list[int]
    total_frames: int
    fps: float


class MissingVideo(FileNotFoundError):
    """A benchmark item's video file or frame folder does not exist."""


class UndecodableVideo(ValueError):
    """A benchmark item's video exists but cannot be decoded, or is in no supported format."""


UNREADABLE_VIDEO = (MissingVideo, UndecodableVideo)


@dataclass(frozen=True)
class OpenedVideo:
    """A video ready to sample: ``total`` frames at ``fps``; ``read(indices)`` returns uint8
    ``[len(indices), H, W, 3]`` (indices may repeat) or raises :class:`UndecodableVideo`."""

    path: str
    total: int
    fps: float
    read: Callable[[list[int]], np.ndarray]


def open_video(path: str, folder_fps: float = FRAME_FOLDER_FPS) -> OpenedVideo:
    """Open a video file (decord), an animated GIF or a folder of frames (PIL), by what ``path`` is.

    A frame folder is read at ``folder_fps``. Raises :class:`MissingVideo` when nothing exists at
    ``path``; :class:`UndecodableVideo` for another extension, a folder without frames or a file
    that does not decode. Both name the path in full and the second the supported formats.
    """
    target = Path(path)
    full = str(target.absolute())  # absolute, not resolved: a symlinked dataset keeps its name
    if target.is_dir():
        return _open_frame_folder(full, folder_fps)
    if not target.is_file():
        raise MissingVideo(f"video not found: {full}")
    suffix = target.suffix.lower()
    if suffix in VIDEO_EXTENSIONS:
        return _open_decord(full)
    if suffix in GIF_EXTENSIONS:
        return _open_gif(full)
    raise UndecodableVideo(f"unsupported video format {suffix or '(no extension)'}: {full}; "
                           f"supported: {SUPPORTED_FORMATS}")


def _open_decord(path: str) -> OpenedVideo:
    """decord's reader; a file whose frames lack timestamps is decoded in order (no seeking)."""
    import decord

    try:
        reader = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        total = len(reader)
        starts = reader.get_frame_timestamp(list(range(total)))[:, 0] if total else np.zeros(0)
    except Exception as error:  # decord raises its own DECORDError
        raise UndecodableVideo(f"cannot decode video {path}: {error}") from error
    in_order = bool((starts < NO_TIMESTAMP_S).any())
    if in_order:
        logger.debug("%s: frames without timestamps, decoded in order", path)
    read = _frames_in_order if in_order else _frames
    return OpenedVideo(path, total, float(reader.get_avg_fps()), lambda indices: read(reader, indices, path))


def _frames(reader, indices: list[int], path: str) -> np.ndarray:
    """uint8 ``[T, H, W, 3]`` at ``indices``; a file that opens but fails mid-way is undecodable."""
    try:
        return reader.get_batch(indices).asnumpy()
    except Exception as error:  # decord raises its own DECORDError
        raise UndecodableVideo(f"cannot decode video {path} at frames {indices[:4]}...: {error}") from error


def _frames_in_order(reader, indices: list[int], path: str) -> np.ndarray:
    """As :func:`_frames`, decoding every frame up to ``max(indices)`` one after another."""
    wanted, decoded = set(indices), {}
    try:
        reader.seek(0)
        for index in range(max(indices) + 1):
            frame = reader.next()
            if index in wanted:
                decoded[index] = frame.asnumpy()
    except Exception as error:  # decord raises its own DECORDError (and StopIteration at the end)
        raise UndecodableVideo(f"cannot decode video {path} up to frame {max(indices)}: {error!r}") from error
    return np.stack([decoded[index] for index in indices])


def _open_gif(path: str) -> OpenedVideo:
    """Every frame of a GIF; fps = frames / play time, from the frame delays as browsers play them."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            delays = []
            for index in range(getattr(image, "n_frames", 1)):
                image.seek(index)
                delays.append(int(image.info.get("duration") or 0))
    except Exception as error:  # PIL raises UnidentifiedImageError, OSError, EOFError, ...
        raise UndecodableVideo(f"cannot decode GIF {path}: {error}") from error
    played = [delay if delay > GIF_MIN_DELAY_MS else GIF_DEFAULT_DELAY_MS for delay in delays]

    def read(indices: list[int]) -> np.ndarray:
        decoded = {}
        try:
            with Image.open(path) as image:
                for index in sorted(set(indices)):  # a GIF frame draws over the last: seek forward
                    image.seek(index)
                    decoded[index] = np.asarray(image.convert("RGB"))
        except Exception as error:  # PIL raises OSError, EOFError, ValueError, ...
            raise UndecodableVideo(f"cannot decode GIF {path} at frames {indices[:4]}...: {error}") from error
        return np.stack([decoded[index] for index in indices])

    return OpenedVideo(path, len(played), 1000.0 * len(played) / sum(played), read)


def _numeric_key(name: str) -> tuple:
    """``img_2.jpg`` before ``img_10.jpg``: digit runs compare as numbers; the name breaks ties."""
    parts = re.split(r"(\d+)", name.lower())
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in parts) + ((1, 0, name),)


def _open_frame_folder(path: str, fps: float) -> OpenedVideo:
    """The image files of a folder, one frame each, in numeric name order, at ``fps``."""
    if not fps > 0:
        raise ValueError(f"a frame folder's fps must be > 0, got {fps!r}")
    files = sorted((entry.name for entry in Path(path).iterdir()
                    if entry.is_file() and entry.suffix.lower() in FRAME_EXTENSIONS), key=_numeric_key)
    if not files:
        raise UndecodableVideo(f"frame folder {path} holds no {'/'.join(FRAME_EXTENSIONS)} frames; "
                               f"supported: {SUPPORTED_FORMATS}")

    def read(indices: list[int]) -> np.ndarray:
        from PIL import Image

        decoded = {}
        for index in sorted(set(indices)):
            frame = Path(path) / files[index]
            try:
                with Image.open(frame) as image:
                    decoded[index] = np.asarray(image.convert("RGB"))
            except Exception as error:  # PIL raises UnidentifiedImageError, OSError, ...
                raise UndecodableVideo(f"cannot decode frame {frame}: {error}") from error
        shapes = sorted({array.shape for array in decoded.values()})
        if len(shapes) > 1:
            raise UndecodableVideo(f"the frames of {path} differ in size: {shapes}")
        return np.stack([decoded[index] for index in indices])

    return OpenedVideo(path, len(files), float(fps), read)


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
    """Frames a Qwen model reads: ``requested`` capped to the video, rounded DOWN to a multiple of
    ``factor`` (the temporal patch), so a video shorter than ``requested`` still works.

    lmms-eval caps with ``min(requested, available)`` and then ``qwen_vl_utils`` rounds half to
    even, which gives 32 > 31 for a 31-frame video and raises; the V-CAST fork rounds down too.
    """
    if requested < factor:
        raise ValueError(f"max_num_frames must be >= {factor} (one temporal patch of the Qwen ViT), got {requested}")
    count = (min(requested, available) // factor) * factor
    if count < factor:
        raise ValueError(f"the video has {available} frame(s); one temporal patch of the Qwen ViT needs {factor}")
    return count


def linspace_indices(total: int, count: int) -> list[int]:
    """``qwen_vl_utils``' frame choice: ``linspace(0, total - 1, count).round()`` (half to even)."""
    return torch.linspace(0, total - 1, count).round().long().tolist()


def qwen_read_indices(video: OpenedVideo, max_num_frames: int,
                      count_for: Callable[[int], int] | None = None) -> list[int]:
    """The frames :func:`read_qwen_video` reads of ``video`` (``count_for`` as there).

    Raises:
        UndecodableVideo: the video is too short for one temporal patch.
    """
    if video.total < 2 <= max_num_frames:  # too short for one temporal patch: costs its item, recorded
        raise UndecodableVideo(f"video {video.path} has {video.total} frame(s); one temporal patch of the Qwen ViT "
                               "needs 2")
    count = qwen_frame_count(max_num_frames, video.total)
    return linspace_indices(video.total, count_for(count) if count_for is not None else count)


def _check_llava_count(max_frames_num: int) -> None:
    if max_frames_num < 1:
        raise ValueError(f"max_num_frames must be >= 1, got {max_frames_num}")


def llava_read_indices(video: OpenedVideo, max_frames_num: int) -> list[int]:
    """The frames :func:`read_llava_video` reads of ``video``.

    Raises:
        ValueError: ``max_frames_num`` < 1.
        UndecodableVideo: the video has no frames.
    """
    _check_llava_count(max_frames_num)
    if video.total < 1:
        raise UndecodableVideo(f"the video {video.path} has no frames")
    return np.linspace(0, video.total - 1, max_frames_num, dtype=int).tolist()


def read_qwen_video(path: str, max_num_frames: int, folder_fps: float = FRAME_FOLDER_FPS,
                    count_for: Callable[[int], int] | None = None) -> DecodedVideo:
    """``qwen_vl_utils``' decord reader with ``nframes``: ``linspace(0, N-1, n).round()`` (a GIF or
    frame folder of N frames sampled as a video file of N frames).

    ``count_for`` maps the frame count the wrapper reads (:func:`qwen_frame_count`) to the one to
    read instead (an input method's fewer frames, :mod:`vcast.input_methods`)."""
    video = open_video(path, folder_fps)
    indices = qwen_read_indices(video, max_num_frames, count_for)
    frames = video.read(indices)
    logger.debug("read %s: %d of %d frames at %.3g fps", video.path, len(indices), video.total, video.fps)
    return DecodedVideo(frames=frames, indices=indices, total_frames=video.total, fps=video.fps)


def read_llava_video(path: str, max_frames_num: int, folder_fps: float = FRAME_FOLDER_FPS) -> DecodedVideo:
    """lmms-eval's LLaVA readers: ``np.linspace(0, N-1, n, dtype=int)`` (frames repeat when the
    video is shorter than ``n``, exactly as there)."""
    _check_llava_count(max_frames_num)  # before the file is opened, as lmms-eval's readers check
    video = open_video(path, folder_fps)
    indices = llava_read_indices(video, max_frames_num)
    return DecodedVideo(frames=video.read(indices), indices=indices, total_frames=video.total, fps=video.fps)


def qwen_frame_size(height: int, width: int, count: int, min_pixels: int, max_pixels: int,
                    total_pixels: int | None = None, patch_size: int = 16) -> tuple[int, int]:
    """``qwen_vl_utils.fetch_video``'s target size ``(H', W')`` for ``count`` frames of
    ``height x width``: multiples of ``2 * patch_size``; the per-frame pixel cap is
    ``min(max_pixels, 768 * 32^2, total_pixels / count * 2)`` (never below ``1.05 * min_pixels``)."""
    from qwen_vl_utils.vision_process import (
        FRAME_FACTOR,
        MODEL_SEQ_LEN,
        SPATIAL_MERGE_SIZE,
        VIDEO_MAX_TOKEN_NUM,
        smart_resize,
    )

    factor = patch_size * SPATIAL_MERGE_SIZE
    if total_pixels is None:
        total_pixels = MODEL_SEQ_LEN * factor * factor * 0.9
    cap = max(min(VIDEO_MAX_TOKEN_NUM * factor * factor, total_pixels / count * FRAME_FACTOR),
              int(min_pixels * 1.05))
    cap = min(max_pixels, cap)
    return smart_resize(height, width, factor=factor, min_pixels=min_pixels, max_pixels=cap)


def qwen_resize(frames: np.ndarray, min_pixels: int, max_pixels: int, total_pixels: int | None = None,
                patch_size: int = 16, size: tuple[int, int] | None = None) -> torch.Tensor:
    """``qwen_vl_utils.fetch_video``'s resize: uint8 ``[T, H, W, 3]`` -> float ``[T, 3, H', W']``.

    ``(H', W')`` is :func:`qwen_frame_size` of the ``T`` frames unless ``size`` gives it (an input
    method's smaller frames, :mod:`vcast.input_methods`); bicubic with antialiasing, as there.
    """
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F

    video = torch.from_numpy(frames).permute(0, 3, 1, 2)
    count, _, height, width = video.shape
    if size is None:
        size = qwen_frame_size(height, width, count, min_pixels, max_pixels, total_pixels, patch_size)
    return F.resize(video, list(size), interpolation=InterpolationMode.BICUBIC, antialias=True).float()
