"""Tiny random-weight checkpoints load through the Auto classes and run a real video end to end."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from transformers import AutoModelForImageTextToText, AutoProcessor  # noqa: E402
from transformers.video_utils import VideoMetadata  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from vcast.families import family_for_arch, family_of  # noqa: E402
from vcast.tiny_checkpoints import ARCHS, build_tiny_checkpoint, checkpoint_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NUM_FRAMES, SIDE, FPS = 8, 64, 4.0


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def moving_square_video(num_frames: int = NUM_FRAMES, side: int = SIDE) -> np.ndarray:
    """uint8 [T, H, W, 3]: a white 16x16 square moving down-right over a dark-blue background."""
    video = np.zeros((num_frames, side, side, 3), dtype=np.uint8)
    video[..., 2] = 60
    for t in range(num_frames):
        y = x = 4 + 4 * t
        video[t, y : y + 16, x : x + 16] = 255
    return video


def prepare(arch: str, processor, video: np.ndarray, fps: float = FPS):
    """Chat-template a one-video question and run the processor on the decoded frames."""
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What moves?"}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    kwargs = {}
    if arch != "llava_onevision":
        meta = VideoMetadata(total_num_frames=len(video), fps=fps, frames_indices=list(range(len(video))))
        kwargs = {"video_metadata": [meta], "do_sample_frames": False}
    return prompt, processor(text=[prompt], videos=[video], return_tensors="pt", **kwargs)


def expected_video_tokens(arch: str, model, inputs) -> int:
    """What the model's own vision path produces for ``inputs`` (the count it checks placeholders against)."""
    with torch.no_grad():
        feats = model.model.get_video_features(pixel_values_videos=inputs["pixel_values_videos"],
                                               **({"video_grid_thw": inputs["video_grid_thw"]}
                                                  if "video_grid_thw" in inputs else {}))
    pooled = feats.pooler_output
    if isinstance(pooled, (tuple, list)):
        return sum(p.shape[0] for p in pooled)
    return pooled.shape[0] * pooled.shape[1]


# The paper's families, whose layouts the two tests below spell out; the others' own files
# (tests/test_family_<name>.py) check theirs.
PAPER_ARCHS = ("qwen3_vl", "qwen3_vl_moe", "llava_onevision")


@pytest.mark.parametrize("arch", ARCHS)
def test_every_arch_loads_as_its_family_s_class(arch: str, tiny_dirs: dict[str, Path]) -> None:
    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch])
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    family = family_for_arch(arch)
    assert type(model).__name__ == family.hf_classes[family.archs.index(arch)]
    assert family_of(model) is family and model.config.model_type == family.model_types[family.archs.index(arch)]
    assert model.config.text_config.vocab_size >= len(processor.tokenizer)
    text = "Hello, world! 123 ~é"
    assert processor.tokenizer.decode(processor.tokenizer(text)["input_ids"]) == text


@pytest.mark.parametrize("arch", PAPER_ARCHS)
def test_loads_through_auto_classes(arch: str, tiny_dirs: dict[str, Path]) -> None:
    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch])
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    expected = {"qwen3_vl": "Qwen3VLForConditionalGeneration", "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration",
                "llava_onevision": "LlavaOnevisionForConditionalGeneration"}[arch]
    assert type(model).__name__ == expected
    assert model.config.text_config.vocab_size >= len(processor.tokenizer)
    text = "Hello, world! 123 ~é"
    assert processor.tokenizer.decode(processor.tokenizer(text)["input_ids"]) == text
    if arch != "llava_onevision":
        vc = model.config.vision_config
        assert (vc.patch_size, vc.temporal_patch_size, vc.spatial_merge_size) == (16, 2, 2)
        assert max(vc.deepstack_visual_indexes) < vc.depth
        assert len(vc.deepstack_visual_indexes) <= model.config.text_config.num_hidden_layers
        tc = model.config.text_config
        assert sum(tc.rope_parameters["mrope_section"]) == tc.head_dim // 2
        assert processor.video_token_id == model.config.video_token_id
        # timestamps cost what they cost with the real tokenizer: < 0 . 5 " seconds" >
        assert len(processor.tokenizer("<0.5 seconds>")["input_ids"]) == 6
    else:
        assert model.config.vision_config.model_type == "siglip_vision_model"
        assert model.config.vision_feature_select_strategy == "full"
        assert processor.video_token_id == model.config.video_token_index


@pytest.mark.parametrize("arch", PAPER_ARCHS)
def test_video_placeholders_match_model_and_generate_is_deterministic(arch: str, tiny_dirs: dict[str, Path]) -> None:
    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch]).eval()
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    prompt, inputs = prepare(arch, processor, moving_square_video())
    video_id = model.config.video_token_id if arch != "llava_onevision" else model.config.video_token_index
    n_placeholders = int((inputs["input_ids"] == video_id).sum())

    if arch == "llava_onevision":
        assert prompt == "<|im_start|>user <video>\nWhat moves?<|im_end|>\n<|im_start|>assistant\n"
        side = checkpoint_spec(arch, "tiny")["vision"]["image_size"] // 14
        assert n_placeholders == NUM_FRAMES * math.ceil(side / 2) ** 2 + 1  # 8 * 3 * 3 + newline = 73
    else:
        assert prompt == ("<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>What moves?<|im_end|>\n"
                          "<|im_start|>assistant\n")
        assert inputs["video_grid_thw"].tolist() == [[NUM_FRAMES // 2, SIDE // 16, SIDE // 16]]
        assert n_placeholders == (NUM_FRAMES // 2) * (SIDE // 32) ** 2  # 4 temporal patches x 2x2 = 16
        assert inputs["mm_token_type_ids"].eq(2).sum() == n_placeholders
        text = processor.tokenizer.decode(inputs["input_ids"][0])
        assert "<0.1 seconds><|vision_start|>" in text and "<1.6 seconds>" in text  # 4 fps, pairs of frames
    assert n_placeholders == expected_video_tokens(arch, model, inputs)

    with torch.no_grad():
        first = model.generate(**inputs, max_new_tokens=4, do_sample=False)
        second = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    prompt_len = inputs["input_ids"].shape[1]
    assert 1 <= first.shape[1] - prompt_len <= 4
    assert torch.equal(first, second)
    assert torch.equal(first[:, :prompt_len], inputs["input_ids"])


@pytest.mark.parametrize("arch", ARCHS)
def test_image_input_runs(arch: str, tiny_dirs: dict[str, Path]) -> None:
    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch]).eval()
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe."}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[prompt], images=[moving_square_video()[0]], return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape[:2] == inputs["input_ids"].shape and torch.isfinite(logits).all()


@pytest.fixture(scope="module")
def mp4_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The moving-square clip encoded as an H.264 mp4 at 4 fps with PyAV (skipped without PyAV)."""
    pytest.importorskip("av", reason="PyAV is not installed; the mp4 round trip is skipped")
    from vcast.eval.video import write_mp4

    path = tmp_path_factory.mktemp("mp4") / "square.mp4"
    write_mp4(path, moving_square_video(), int(FPS), codec="libx264")
    return path


@pytest.mark.parametrize("arch", ARCHS)
def test_real_mp4_round_trip(arch: str, mp4_path: Path, tiny_dirs: dict[str, Path]) -> None:
    """Decode the mp4 with transformers' own PyAV loader (real fps metadata) and generate from it.

    (transformers 5.23 cannot decode a video *path* inside the processor without torchcodec, since
    torchvision 0.26+ has no read_video; so the frames are decoded first and passed as an array.)
    """
    from transformers.video_utils import load_video

    decoded, meta = load_video(str(mp4_path), backend="pyav")
    assert decoded.shape == (NUM_FRAMES, SIDE, SIDE, 3) and meta.fps == FPS
    assert np.abs(decoded.astype(int) - moving_square_video().astype(int)).mean() < 20  # lossy, same clip

    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch]).eval()
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    _, inputs = prepare(arch, processor, decoded, fps=meta.fps)
    video_id = model.config.video_token_id if arch != "llava_onevision" else model.config.video_token_index
    assert int((inputs["input_ids"] == video_id).sum()) == expected_video_tokens(arch, model, inputs)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=2, do_sample=False)
    assert out.shape[1] > inputs["input_ids"].shape[1]


@pytest.mark.parametrize("arch", ARCHS)
def test_same_seed_same_weights_other_seed_differs(arch: str, tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    again = build_tiny_checkpoint(arch, "tiny", tmp_path / "again", seed=0)
    other = build_tiny_checkpoint(arch, "tiny", tmp_path / "other", seed=1)
    a, b, c = (load_file(d / "model.safetensors") for d in (tiny_dirs[arch], again, other))
    assert a.keys() == b.keys() == c.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    for name in ("config.json", "processor_config.json", "tokenizer.json", "chat_template.jinja"):
        assert (again / name).read_bytes() == (tiny_dirs[arch] / name).read_bytes(), name


def test_build_does_not_touch_global_rng(tmp_path: Path) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_checkpoint("qwen3_vl", "tiny", tmp_path / "c", seed=7)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(("arch", "size", "bad"), [("qwen2_audio", "tiny", "qwen2_audio"), ("qwen3_vl", "huge", "huge")])
def test_bad_arch_or_size_raises(arch: str, size: str, bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=bad):
        build_tiny_checkpoint(arch, size, tmp_path / "x")
    assert list(tmp_path.iterdir()) == []  # validated before anything is written


def test_existing_folder_is_kept_unless_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        build_tiny_checkpoint("llava_onevision", "tiny", out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    build_tiny_checkpoint("llava_onevision", "tiny", out, overwrite=True)
    assert not (out / "keep.txt").exists() and (out / "model.safetensors").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temp or old folders left


def test_failed_build_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    # The model is already saved into the temp folder when the processor save fails.
    monkeypatch.setattr(transformers.ProcessorMixin, "save_pretrained", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        build_tiny_checkpoint("qwen3_vl", "tiny", tmp_path / "ckpt")
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_restores_the_old_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    real_replace = os.replace

    def replace(source, target):
        if Path(source).name.startswith(".ckpt.tmp-"):  # the final move of the new build into place
            raise OSError("rename failed")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="rename failed"):
        build_tiny_checkpoint("qwen3_vl", "tiny", out, overwrite=True)
    assert (out / "mine.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


@pytest.mark.slow
def test_cli_smoke(tmp_path: Path) -> None:
    out = tmp_path / "cli_ckpt"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, str(ROOT / "scripts" / "make_tiny_checkpoint.py"), "--arch", "qwen3_vl_moe",
           "--size", "tiny", "--out", str(out), "--seed", "3"]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out.resolve())
    assert AutoModelForImageTextToText.from_pretrained(out).config.model_type == "qwen3_vl_moe"

    bad = subprocess.run(cmd[:3] + ["nope", "--size", "tiny", "--out", str(tmp_path / "bad")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "nope" in bad.stderr


@pytest.fixture(scope="module")
def bench_processors(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("bench")
    return {arch: AutoProcessor.from_pretrained(build_tiny_checkpoint(arch, "bench", root / arch))
            for arch in ("qwen3_vl", "llava_onevision")}


@pytest.mark.slow
def test_bench_qwen3_vl_processor_has_the_published_video_budget(bench_processors: dict) -> None:
    """64 frames of 448 x 448 -> 32 temporal patches x 14 x 14 = 196 tokens each, as with the real
    checkpoints (min 4096 / max 25,165,824 pixels); the class defaults would give 3 x 3 = 9."""
    from transformers import Qwen3VLVideoProcessor

    processor = bench_processors["qwen3_vl"]
    video = processor.video_processor
    assert dict(video.size) == {"shortest_edge": 4096, "longest_edge": 25_165_824}
    assert (video.fps, video.min_frames, video.max_frames) == (2, 4, 768)
    clip = moving_square_video(num_frames=64, side=448)
    _, inputs = prepare("qwen3_vl", processor, clip, fps=2.0)
    t, h, w = inputs["video_grid_thw"][0].tolist()
    assert (t, h * w // 4) == (32, 196)
    assert int((inputs["input_ids"] == processor.video_token_id).sum()) == 32 * 196
    defaults = Qwen3VLVideoProcessor()(videos=[clip], video_metadata=[VideoMetadata(
        total_num_frames=64, fps=2.0, frames_indices=list(range(64)))], do_sample_frames=False, return_tensors="pt")
    t, h, w = defaults["video_grid_thw"][0].tolist()
    assert h * w // 4 == 9  # why the bench checkpoint sets the budget itself


@pytest.mark.slow
def test_bench_llava_onevision_has_the_real_siglip_grid(bench_processors: dict) -> None:
    """384 px frames, 27 x 27 SigLIP patches, pooled to 14 x 14 = 196 tokens a frame."""
    assert checkpoint_spec("llava_onevision", "bench")["vision"]["image_size"] == 384
    processor = bench_processors["llava_onevision"]
    _, inputs = prepare("llava_onevision", processor, moving_square_video(num_frames=4, side=448))
    assert tuple(inputs["pixel_values_videos"].shape[-2:]) == (384, 384)
    assert int((inputs["input_ids"] == processor.video_token_id).sum()) == 4 * 14 * 14 + 1  # + image_newline
