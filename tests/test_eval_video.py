"""The plugins' video reading: lmms-eval's frame sampling and qwen_vl_utils' resize, on real mp4s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("decord")
pytest.importorskip("qwen_vl_utils")

from vcast.eval.video import qwen_frame_count, qwen_resize, read_llava_video, read_qwen_video  # noqa: E402
from vcast.eval.video import write_mp4 as encode_mp4  # noqa: E402

BITS = 6


def write_mp4(path: Path, frames: int, side: int = 96, fps: int = 8) -> Path:
    """A real mp4 whose frame t shows t in binary as 6 black / white bands (read back by
    :func:`frame_ids`; bands survive lossy coding where exact grey levels do not)."""
    video = np.zeros((frames, side, side, 3), dtype=np.uint8)
    for t in range(frames):
        for bit, band in enumerate(np.array_split(np.arange(side), BITS)):
            video[t, band] = 255 * ((t >> bit) & 1)
    encode_mp4(path, video, fps)
    return path


def frame_ids(frames: np.ndarray) -> list[int]:
    """The index each frame of uint8 ``[T, H, W, 3]`` shows (see :func:`write_mp4`)."""
    bands = np.array_split(np.arange(frames.shape[1]), BITS)
    bits = np.stack([frames[:, band].mean(axis=(1, 2, 3)) > 128 for band in bands], 1)
    return (bits * (1 << np.arange(BITS))).sum(1).tolist()


@pytest.mark.parametrize("requested, available, expected", [(32, 64, 32), (32, 31, 30), (32, 20, 20), (31, 64, 30),
                                                             (16, 2, 2)])
def test_qwen_frame_count_is_even_and_within_the_video(requested: int, available: int, expected: int) -> None:
    assert qwen_frame_count(requested, available) == expected


@pytest.mark.parametrize("requested, available", [(32, 1), (1, 64)])
def test_qwen_frame_count_names_the_impossible_value(requested: int, available: int) -> None:
    with pytest.raises(ValueError, match=str(min(requested, available))):
        qwen_frame_count(requested, available)


def test_short_odd_video_reads_without_crashing(tmp_path: Path) -> None:
    """31 frames, 32 asked: lmms-eval's cap gives round(31/2)*2 = 32 > 31 and raises; we read 30."""
    decoded = read_qwen_video(str(write_mp4(tmp_path / "v.mp4", 31)), 32)
    assert decoded.frames.shape[0] == 30 and decoded.total_frames == 31
    assert decoded.indices == torch.linspace(0, 30, 30).round().long().tolist()
    assert frame_ids(decoded.frames) == decoded.indices


def test_llava_sampling_repeats_frames_of_a_short_video_like_lmms_eval(tmp_path: Path) -> None:
    decoded = read_llava_video(str(write_mp4(tmp_path / "v.mp4", 20)), 32)
    assert decoded.indices == np.linspace(0, 19, 32, dtype=int).tolist()
    assert frame_ids(decoded.frames) == decoded.indices


def test_qwen_read_and_resize_equal_qwen_vl_utils(tmp_path: Path) -> None:
    """Same frames, same indices, same resized float pixels as ``qwen_vl_utils.fetch_video`` with
    decord (what lmms-eval's Qwen3-VL wrapper calls) on a video it can read."""
    from qwen_vl_utils.vision_process import _read_video_decord, fetch_video

    path = str(write_mp4(tmp_path / "v.mp4", 40, side=200))
    ele = {"video": path, "nframes": 16, "min_pixels": 4096, "max_pixels": 40000}
    expected, metadata = fetch_video(ele, image_patch_size=16, return_video_metadata=True)
    _, reference_meta, _ = _read_video_decord(ele)  # the decord path explicitly, whatever the backend
    decoded = read_qwen_video(path, 16)
    ours = qwen_resize(decoded.frames, min_pixels=4096, max_pixels=40000)
    assert decoded.indices == reference_meta["frames_indices"] == metadata["frames_indices"]
    assert ours.shape == expected.shape and ours.shape[-1] % 32 == 0 and ours.shape[-2] % 32 == 0
    assert torch.equal(ours, expected)


def test_missing_and_corrupt_videos_raise_with_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        read_qwen_video(str(tmp_path / "nope.mp4"), 8)
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video at all")
    with pytest.raises(ValueError, match="bad.mp4"):
        read_llava_video(str(bad), 8)
