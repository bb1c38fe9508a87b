"""What the upstream MVBench release holds besides mp4 (.webm, .avi, .gif, folders of frames), read
from real files whose frame t is filled with grey level 20 * t, so the frames read show which
indices were decoded; and the refusals, which name the path in full."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("decord")
pytest.importorskip("av")
from PIL import Image

from vcast.eval.video import (
    FRAME_FOLDER_FPS,
    MissingVideo,
    UndecodableVideo,
    is_video_path,
    read_llava_video,
    read_qwen_video,
)

FRAMES, SIDE, STEP = 12, 32, 20


def grey_video(frames: int = FRAMES) -> np.ndarray:
    """uint8 ``[T, SIDE, SIDE, 3]``: frame t is grey level ``STEP * t``."""
    return np.stack([np.full((SIDE, SIDE, 3), STEP * t, np.uint8) for t in range(frames)])


def shown(frames: np.ndarray) -> list[int]:
    """The index each uint8 ``[T, H, W, 3]`` frame of :func:`grey_video` shows (lossy codecs move
    grey levels by a few units, far less than ``STEP / 2``)."""
    return (frames.reshape(len(frames), -1).mean(1) / STEP).round().astype(int).tolist()


def write_gif(path: Path, frames: np.ndarray, durations: list[int] | int) -> Path:
    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=durations, loop=0)
    return path


def write_folder(folder: Path, names: list[str], frames: np.ndarray) -> Path:
    folder.mkdir()
    for name, frame in zip(names, frames):
        Image.fromarray(frame).save(folder / name)
    return folder


# (file name, PyAV encoder, fps, pixel format): every container decord reads here, among them
# what MVBench's release ships besides .mp4: SSv2's .webm (VP8/VP9) and NTU RGB+D's .avi.
CONTAINERS = [
    ("vp8.webm", "libvpx", 8, "yuv420p"),
    ("vp9.webm", "libvpx-vp9", 8, "yuv420p"),
    ("mpeg4.avi", "mpeg4", 8, "yuv420p"),
    ("mjpeg.avi", "mjpeg", 8, "yuvj420p"),
    ("h264.avi", "libx264", 8, "yuv420p"),
    ("h264.mkv", "libx264", 8, "yuv420p"),
    ("h264.mov", "libx264", 8, "yuv420p"),
    ("h264.m4v", "libx264", 8, "yuv420p"),
    ("h264.3gp", "libx264", 8, "yuv420p"),
    ("flv1.flv", "flv", 8, "yuv420p"),
    ("wmv2.wmv", "wmv2", 8, "yuv420p"),
    ("mpeg1.mpeg", "mpeg1video", 25, "yuv420p"),
    ("mpeg2.mpg", "mpeg2video", 25, "yuv420p"),
]
# Their frames carry no timestamps, and decord's seeks go wrong: MPEG program streams always give
# frame 0, H.264 in AVI (B-frames) a wrong late frame about one read in four. Read in order instead.
NO_TIMESTAMPS = ["h264.avi", "mpeg1.mpeg", "mpeg2.mpg"]
UNDECODABLE = [("av1.webm", "libaom-av1", 8, "yuv420p")]  # decord's FFmpeg has no AV1 decoder

# Run in a fresh interpreter: once decord is loaded, its bundled libvpx shadows PyAV's and PyAV's
# VP8/VP9 encoders fail to open ("Invalid argument").
WRITER = """
import sys
import av
import numpy as np
folder, frames, side, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for spec in sys.argv[5:]:
    name, codec, fps, pix_fmt = spec.split(":")
    with av.open(f"{folder}/{name}", mode="w") as container:
        stream = container.add_stream(codec, rate=int(fps), options={"cpu-used": "8"} if "aom" in codec else {})
        stream.height = stream.width = side
        stream.pix_fmt = pix_fmt
        for t in range(frames):
            rgb = np.full((side, side, 3), step * t, np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=pix_fmt)))
        container.mux(stream.encode())
"""


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`grey_video` in every container of ``CONTAINERS`` and ``UNDECODABLE``, written by PyAV."""
    folder = tmp_path_factory.mktemp("containers")
    specs = [":".join(map(str, spec)) for spec in CONTAINERS + UNDECODABLE]
    subprocess.run([sys.executable, "-c", WRITER, str(folder), str(FRAMES), str(SIDE), str(STEP), *specs], check=True)
    return folder


@pytest.mark.parametrize("name, fps", [(c[0], c[2]) for c in CONTAINERS], ids=[c[0] for c in CONTAINERS])
def test_video_containers_decode_at_the_sampled_indices(clips: Path, name: str, fps: int) -> None:
    path = str(clips / name)
    qwen = read_qwen_video(path, 6)
    assert qwen.total_frames == FRAMES and qwen.fps == pytest.approx(fps)
    assert qwen.indices == torch.linspace(0, FRAMES - 1, 6).round().long().tolist()
    assert shown(qwen.frames) == qwen.indices
    llava = read_llava_video(path, 5)
    assert shown(llava.frames) == llava.indices == np.linspace(0, FRAMES - 1, 5, dtype=int).tolist()


@pytest.mark.parametrize("name", NO_TIMESTAMPS)
def test_files_without_timestamps_read_the_right_frames_every_time(clips: Path, name: str) -> None:
    for _ in range(10):
        for count in (5, 2):
            decoded = read_llava_video(str(clips / name), count)
            assert shown(decoded.frames) == decoded.indices


def test_av1_webm_is_refused_by_name(clips: Path) -> None:
    """Refused with the path, not read wrong."""
    with pytest.raises(UndecodableVideo, match=f"cannot decode video {clips / 'av1.webm'}"):
        read_qwen_video(str(clips / "av1.webm"), 2)


def test_gif_reads_every_frame_with_fps_from_its_delays(tmp_path: Path) -> None:
    """Frame t of 10 has a square at column 3t on black, so PIL stores only what changed; frames
    read out of order and repeated must still be whole. Delays of 50 ms: 20 fps."""
    video = np.zeros((10, SIDE, SIDE, 3), np.uint8)
    for t in range(10):
        video[t, 4:8, 3 * t:3 * t + 2] = (255, 40 * (t % 6), 0)
    path = str(write_gif(tmp_path / "clip.gif", video, 50))
    decoded = read_llava_video(path, 16)  # longer than the GIF: frames repeat, as for a video file
    assert decoded.total_frames == 10 and decoded.fps == pytest.approx(20.0)
    assert decoded.indices == np.linspace(0, 9, 16, dtype=int).tolist()
    np.testing.assert_array_equal(decoded.frames, video[decoded.indices])
    qwen = read_qwen_video(path, 4)
    assert qwen.indices == [0, 3, 6, 9]
    np.testing.assert_array_equal(qwen.frames, video[qwen.indices])


@pytest.mark.parametrize("durations, fps", [([100, 100, 200, 200, 400, 200], 6 / 1.2), (0, 10.0)])
def test_gif_fps_is_frames_over_play_time(tmp_path: Path, durations: list[int] | int, fps: float) -> None:
    """Uneven delays average like decord's ``get_avg_fps``; no delay plays as 100 ms (browsers)."""
    path = str(write_gif(tmp_path / "clip.gif", grey_video(6), durations))
    decoded = read_qwen_video(path, 6)
    assert decoded.fps == pytest.approx(fps)
    assert shown(decoded.frames) == decoded.indices == list(range(6))


def test_frame_folder_reads_in_numeric_order_at_its_fps(tmp_path: Path) -> None:
    """``img_2`` before ``img_10`` (a plain sort puts ``img_10`` second); other files are ignored."""
    folder = write_folder(tmp_path / "clip", [f"img_{t + 1}.png" for t in range(FRAMES)], grey_video())
    (folder / "notes.txt").write_text("not a frame")
    (folder / "thumbs").mkdir()
    decoded = read_qwen_video(str(folder), 6)
    assert decoded.total_frames == FRAMES and decoded.fps == FRAME_FOLDER_FPS == 3.0
    assert decoded.indices == torch.linspace(0, FRAMES - 1, 6).round().long().tolist()
    assert shown(decoded.frames) == decoded.indices
    llava = read_llava_video(str(folder), 20, folder_fps=25)
    assert llava.fps == 25.0 and shown(llava.frames) == llava.indices == np.linspace(0, 11, 20, dtype=int).tolist()


def test_mvbench_style_jpg_folder(tmp_path: Path) -> None:
    """TVQA's frames as MVBench ships them: ``00001.jpg``, ``00002.jpg``, ... (mixed-case suffixes too)."""
    names = [f"{t + 1:05d}.{'JPG' if t % 2 else 'jpg'}" for t in range(FRAMES)]
    decoded = read_llava_video(str(write_folder(tmp_path / "s07e04_seg02_clip_14", names, grey_video())), FRAMES)
    assert shown(decoded.frames) == decoded.indices == list(range(FRAMES))


def test_frame_folder_of_unequal_frames_is_undecodable(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "clip", ["1.png", "2.png"], grey_video(2))
    Image.new("RGB", (SIDE, SIDE + 2)).save(folder / "3.png")
    with pytest.raises(UndecodableVideo, match=f"the frames of {folder} differ in size"):
        read_llava_video(str(folder), 3)
    (folder / "3.png").write_bytes(b"not a png")
    with pytest.raises(UndecodableVideo, match=f"cannot decode frame {folder / '3.png'}"):
        read_llava_video(str(folder), 3)


def test_missing_paths_name_the_full_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path is reported absolute, for a file and for a frame folder (no extension)."""
    monkeypatch.chdir(tmp_path)
    for name in ("gone.webm", "gone.gif", "tvqa/clip_14"):
        with pytest.raises(MissingVideo, match=f"video not found: {tmp_path / name}$"):
            read_qwen_video(name, 4)


@pytest.mark.parametrize("name", ["clip.xyz", "clip.ts", "clip"])
def test_unsupported_files_are_refused_with_the_supported_formats(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(b"\x00" * 64)
    with pytest.raises(UndecodableVideo) as raised:
        read_llava_video(str(tmp_path / name), 4)
    message = str(raised.value)
    assert f"unsupported video format {Path(name).suffix or '(no extension)'}: {tmp_path / name};" in message
    assert all(word in message for word in (".webm", ".avi", ".gif", "folder of frames", ".jpg"))


def test_empty_folder_and_corrupt_gif_are_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("frames were never extracted")
    with pytest.raises(UndecodableVideo, match=f"frame folder {tmp_path / 'empty'} holds no .jpg/.jpeg/.png frames"):
        read_qwen_video(str(tmp_path / "empty"), 4)
    (tmp_path / "bad.gif").write_bytes(b"GIF89a truncated")
    with pytest.raises(UndecodableVideo, match=f"cannot decode GIF {tmp_path / 'bad.gif'}"):
        read_qwen_video(str(tmp_path / "bad.gif"), 4)


def test_every_string_visual_is_a_video_to_read(tmp_path: Path) -> None:
    """A frame folder or a missing path has no video extension; the plugins must still read (or
    record) it rather than drop it or fail the cell. Images arrive as PIL images."""
    assert all(is_video_path(value) for value in (str(tmp_path), "tvqa/clip_14", "a.gif", "a.webm", "gone.mp4"))
    assert not any(is_video_path(value) for value in (Image.new("RGB", (4, 4)), None, tmp_path))


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
def test_plugins_read_gifs_and_frame_folders_and_record_the_rest(tiny_dirs: dict, tmp_path: Path, arch: str) -> None:
    """One batch as MVBench's doc_to_visual hands it over: a frame folder and a GIF are answered;
    a missing frame folder and an unsupported file are recorded by name, not fatal."""
    from lmms_eval.api.instance import Instance

    from vcast.families.llava_onevision.plugin import VCastLlavaOV
    from vcast.eval.missing_visuals import read_missing
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    video = np.stack([np.full((64, 64, 3), 15 * t, np.uint8) for t in range(8)])
    (tmp_path / "clip.xyz").write_bytes(b"\x00" * 64)
    paths = [str(write_folder(tmp_path / "frames", [f"{t + 1:05d}.jpg" for t in range(8)], video)),
             str(write_gif(tmp_path / "clip.gif", video, 100)), str(tmp_path / "gone"), str(tmp_path / "clip.xyz")]
    context = "What changes?\nA. 1\nB. 2"
    requests = [Instance("generate_until", (context, {"max_new_tokens": 2}, lambda doc: [doc["path"]], i, "mv", "test"),
                         idx=0, metadata={"task": "mv", "doc_id": i, "repeats": 1}) for i in range(len(paths))]
    kwargs = {"method": "vcast", "ratio": 0.5, "batch_size": 4, "efficiency_dir": str(tmp_path / "eff"),
              "max_num_frames": 4}
    if arch == "qwen3_vl":
        plugin = VCastQwen3VL(pretrained=str(tiny_dirs[arch]), max_pixels=16384, min_pixels=4096, **kwargs)
    else:
        plugin = VCastLlavaOV(pretrained=str(tiny_dirs[arch]), **kwargs)
    plugin.task_dict = {"mv": {"test": [{"path": path} for path in paths]}}
    answers = plugin.generate_until(requests)
    assert answers[2] == answers[3] == "" and plugin.efficiency.records[-1].doc_ids == [0, 1]
    recorded = {item["doc_id"]: item["error"] for item in read_missing(tmp_path / "eff")}
    assert sorted(recorded) == [2, 3]
    assert recorded[2].startswith("MissingVideo") and paths[2] in recorded[2]
    assert recorded[3].startswith("UndecodableVideo") and paths[3] in recorded[3] and ".gif" in recorded[3]


def test_a_one_frame_video_costs_its_item_on_qwen(tmp_path: Path) -> None:
    """Qwen3-VL needs one temporal patch (2 frames): a 1-frame folder is an unreadable item
    (recorded by the plugin), not an error that fails the whole cell."""
    folder = write_folder(tmp_path / "one", ["00001.jpg"], grey_video(1))
    with pytest.raises(UndecodableVideo, match=r"has 1 frame\(s\); one temporal patch of the Qwen ViT needs 2"):
        read_qwen_video(str(folder), 16)
    assert read_llava_video(str(folder), 4).frames.shape[0] == 4  # LLaVA repeats it, as lmms-eval does
