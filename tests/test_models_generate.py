"""Pruning inside real models: hooked generate() equals the pruned prompt fed without hooks.

Every test runs the real transformers classes (tiny random weights), the real processors and a
generated clip. The reference (``vcast.models.reference``) feeds the kept token ids, the vision
encoder's outputs restricted to the kept tokens and the kept tokens' positions straight to an
untouched model; the hooks must produce the same tokens and the same logits.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from transformers import AutoModelForImageTextToText, AutoProcessor  # noqa: E402

import vcast  # noqa: E402
from tests.model_inputs import batch, clip  # noqa: E402
from vcast.models.reference import encode, pruned_inputs, survivors  # noqa: E402
from vcast.tiny_checkpoints import ARCHS  # noqa: E402

NEW_TOKENS = 16
GREEDY = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
              return_dict_in_generate=True, output_logits=True)


def load(path: Path, attn: str = "sdpa") -> tuple[Any, Any]:
    model = AutoModelForImageTextToText.from_pretrained(path, attn_implementation=attn).eval()
    return model, AutoProcessor.from_pretrained(path)


def generate(model: Any, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy ``NEW_TOKENS`` tokens: (the whole sequence [B, L + N], logits [N, B, V])."""
    with torch.no_grad():
        out = model.generate(**inputs, **GREEDY)
    return out.sequences, torch.stack(out.logits)


def reference(model: Any, inputs: Any, stats: Any, positions: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Generate from the pruned prompt without hooks: (new tokens [1, N], logits [N, 1, V], kept length)."""
    with torch.no_grad():
        kwargs = pruned_inputs(model, inputs, encode(model, inputs), survivors(stats, inputs["input_ids"]), positions)
    sequences, logits = generate(model, kwargs)
    kept = kwargs["input_ids"].shape[1]
    return sequences[:, kept:], logits, kept


def assert_same_decode(tokens: torch.Tensor, logits: torch.Tensor, ref_tokens: torch.Tensor,
                       ref_logits: torch.Tensor) -> None:
    assert tokens.tolist() == ref_tokens.tolist()
    torch.testing.assert_close(logits, ref_logits, rtol=1e-4, atol=1e-5)


CASES = [(arch, attn, None) for arch in ARCHS for attn in ("sdpa", "eager")] + [
    ("llava_onevision", "sdpa", "original"),
    ("llava_onevision", "eager", "original"),
]


@pytest.mark.parametrize(("arch", "attn", "positions"), CASES)
def test_hooked_generate_equals_hook_free_reference(arch: str, attn: str, positions: str | None,
                                                    tiny_dirs: dict[str, Path]) -> None:
    model, processor = load(tiny_dirs[arch], attn)
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    length = inputs["input_ids"].shape[1]
    with vcast.models.attach(model, ratio=0.25, positions=positions) as handle:
        sequences, logits = generate(model, inputs)
        stats = handle.stats
    # generate() still returns the full prompt, so callers trim the prompt as usual.
    assert torch.equal(sequences[:, :length], inputs["input_ids"])
    (video,) = stats.segments
    assert video.kept == int(0.25 * video.total) and video.kept < video.total
    assert stats.tokens_after == [length - (video.total - video.kept)]
    assert stats.decode_steps == NEW_TOKENS - 1

    ref_tokens, ref_logits, kept_length = reference(model, inputs, stats, handle.adapter.positions)
    assert kept_length == stats.tokens_after[0]
    assert_same_decode(sequences[:, length:], logits, ref_tokens, ref_logits)


@pytest.mark.parametrize("arch", ARCHS)
def test_selection_runs_on_the_encoders_frame_tokens(arch: str, tiny_dirs: dict[str, Path]) -> None:
    """The hook selects on exactly the vision encoder's [T, P, D] tokens of the video (LLaVA: without
    the trailing newline), and records their prompt columns."""
    model, processor = load(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    with vcast.models.attach(model, ratio=0.25, tau=0.5) as handle:
        generate(model, inputs)
        (video,) = handle.stats.segments
    with torch.no_grad():
        pooled = encode(model, inputs)["video"].pooler_output
    tokens = pooled[0] if arch != "llava_onevision" else pooled[0, :-1]  # LLaVA: drop the newline
    expected = vcast.select(tokens.reshape(video.frames, video.tokens_per_frame, -1), 0.25, tau=0.5)
    assert video.keep.tolist() == expected.keep.tolist()
    assert video.budgets == expected.budgets.tolist()

    video_id = model.config.video_token_id if arch != "llava_onevision" else model.config.video_token_index
    placeholders = (inputs["input_ids"][0] == video_id).nonzero().squeeze(1)
    expected_columns = placeholders if arch != "llava_onevision" else placeholders[:-1]
    assert video.positions.tolist() == expected_columns.tolist()


@pytest.mark.parametrize("arch", ARCHS)
def test_reference_is_sensitive_to_positions(arch: str, tiny_dirs: dict[str, Path]) -> None:
    """The equality above would catch wrong positions: renumbering the kept tokens changes the logits."""
    model, processor = load(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    with vcast.models.attach(model, ratio=0.25) as handle:
        _, logits = generate(model, inputs)
        stats = handle.stats
    with torch.no_grad():
        kwargs = pruned_inputs(model, inputs, encode(model, inputs), survivors(stats, inputs["input_ids"]),
                               handle.adapter.positions)
        kept = kwargs["input_ids"].shape[1]
        if arch == "llava_onevision":  # hooked default is compact: feed original positions instead
            kwargs["position_ids"] = survivors(stats, inputs["input_ids"])[0].nonzero().T
        else:  # MRoPE (t, h, w) replaced by the 1-D compact numbering
            kwargs["position_ids"] = torch.arange(kept).view(1, 1, -1).expand(4, 1, kept).clone()
        _, wrong = generate(model, kwargs)
    assert (logits - wrong).abs().max() > 1e-3


@pytest.mark.parametrize("arch", ARCHS)
def test_left_padded_batch_matches_each_sample_alone(arch: str, tiny_dirs: dict[str, Path]) -> None:
    model, processor = load(tiny_dirs[arch])
    questions = ["What moves?", "Where does the bright square go, and how fast does it move across the frame?"]
    if arch == "llava_onevision":  # one frame count per batch (pixel_values_videos is [B, F, ...])
        videos = [clip(8, 128, seed=0), clip(8, 96, seed=1)]
    else:  # different grids: the samples lose different numbers of tokens
        videos = [clip(8, 128, seed=0), clip(4, 96, seed=1)]
    both = batch(arch, processor, questions, videos)
    assert (both["attention_mask"] == 0).any(), "the batch must be padded for this test to mean anything"
    with vcast.models.attach(model, ratio=0.25) as handle:
        sequences, logits = generate(model, both)
        stats = handle.stats
        assert sorted(s.sample for s in stats.segments) == [0, 1]
        assert all(s.kept < s.total for s in stats.segments)
        for i, (question, video) in enumerate(zip(questions, videos)):
            alone = batch(arch, processor, [question], [video])
            single, single_logits = generate(model, alone)
            assert handle.stats.segments[0].keep.tolist() == next(s for s in stats.segments if s.sample == i).keep.tolist()
            new = sequences[i, both["input_ids"].shape[1]:]
            assert new.tolist() == single[0, alone["input_ids"].shape[1]:].tolist()
            torch.testing.assert_close(logits[:, i], single_logits[:, 0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_ratio_one_leaves_logits_identical(arch: str, tiny_dirs: dict[str, Path]) -> None:
    model, processor = load(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves?", "Describe the clip in detail."], [clip(seed=0), clip(seed=2)])
    with torch.no_grad():
        vanilla = model(**inputs).logits
        with vcast.models.attach(model, ratio=1.0) as handle:
            hooked = model(**inputs).logits
            stats = handle.stats
    assert all(s.kept == s.total for s in stats.segments) and len(stats.segments) == 2
    assert torch.equal(hooked, vanilla)


@pytest.mark.parametrize("arch", ARCHS)
def test_images_stay_whole_unless_asked(arch: str, tiny_dirs: dict[str, Path]) -> None:
    model, processor = load(tiny_dirs[arch])
    inputs = batch(arch, processor, ["Describe the picture."], [None], [clip(1, 96, seed=3)[0]])
    with torch.no_grad():
        vanilla = model(**inputs).logits
        with vcast.models.attach(model, ratio=0.25) as handle:
            hooked = model(**inputs).logits
            assert handle.stats.segments == []
        with vcast.models.attach(model, ratio=0.25, compress_images=True) as handle:
            compressed = model(**inputs).logits
            (image,) = handle.stats.segments
    assert torch.equal(hooked, vanilla)
    assert image.kind == "image" and image.frames == 1 and image.kept == int(0.25 * image.total)
    assert compressed.shape[1] == vanilla.shape[1] - (image.total - image.kept)


@pytest.mark.parametrize("arch", ARCHS)
def test_image_and_video_prompt(arch: str, tiny_dirs: dict[str, Path]) -> None:
    """Only the video is pruned; the image (and, on Qwen3-VL, its DeepStack rows) stays aligned."""
    model, processor = load(tiny_dirs[arch])
    inputs = batch(arch, processor, ["Is the picture in the clip?"], [clip()], [clip(1, 96, seed=3)[0]])
    length = inputs["input_ids"].shape[1]
    with vcast.models.attach(model, ratio=0.25) as handle:
        sequences, logits = generate(model, inputs)
        stats = handle.stats
    assert [s.kind for s in stats.segments] == ["video"]
    ref_tokens, ref_logits, _ = reference(model, inputs, stats, handle.adapter.positions)
    assert_same_decode(sequences[:, length:], logits, ref_tokens, ref_logits)


@pytest.mark.parametrize("arch", ARCHS)
def test_compressed_image_and_video_generate(arch: str, tiny_dirs: dict[str, Path]) -> None:
    """compress_images=True: the image is one more (one-frame) segment, pruned like a video."""
    model, processor = load(tiny_dirs[arch])
    inputs = batch(arch, processor, ["Is the picture in the clip?"], [clip()], [clip(1, 96, seed=3)[0]])
    length = inputs["input_ids"].shape[1]
    with vcast.models.attach(model, ratio=0.25, compress_images=True) as handle:
        sequences, logits = generate(model, inputs)
        stats = handle.stats
    assert sorted(s.kind for s in stats.segments) == ["image", "video"]
    assert all(s.kept < s.total for s in stats.segments)
    ref_tokens, ref_logits, _ = reference(model, inputs, stats, handle.adapter.positions)
    assert_same_decode(sequences[:, length:], logits, ref_tokens, ref_logits)


@pytest.mark.parametrize("arch", ARCHS)
def test_forward_with_pixels_prunes_too(arch: str, tiny_dirs: dict[str, Path]) -> None:
    """A plain forward (pixels and grids reach the model, as in generate() before transformers 5.18)."""
    model, processor = load(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    with torch.no_grad(), vcast.models.attach(model, ratio=0.25) as handle:
        logits = model(**inputs).logits
        stats = handle.stats
    with torch.no_grad():
        kwargs = pruned_inputs(model, inputs, encode(model, inputs), survivors(stats, inputs["input_ids"]),
                               handle.adapter.positions)
        expected = model(**kwargs).logits
    assert logits.shape[1] == stats.tokens_after[0] < inputs["input_ids"].shape[1]
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-5)


def test_manual_decode_without_positions_is_refused(tiny_dirs: dict[str, Path]) -> None:
    """Qwen3-VL would place new tokens after the pruned prompt: a clear error instead."""
    model, processor = load(tiny_dirs["qwen3_vl"])
    inputs = batch("qwen3_vl", processor, ["What moves?"], [clip()])
    with torch.no_grad(), vcast.models.attach(model, ratio=0.25):
        first = model(**inputs, use_cache=True)
        step = first.logits[:, -1:].argmax(-1)
        with pytest.raises(ValueError, match="without position_ids"):
            model(input_ids=step, past_key_values=first.past_key_values, use_cache=True)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("arch", ARCHS)
def test_flash_attention_2_on_gpu(arch: str, tiny_dirs: dict[str, Path]) -> None:
    pytest.importorskip("flash_attn", reason="flash-attn is not installed")
    model = AutoModelForImageTextToText.from_pretrained(
        tiny_dirs[arch], attn_implementation="flash_attention_2", dtype=torch.bfloat16
    ).cuda().eval()
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves?"], [clip()]).to("cuda")
    length = inputs["input_ids"].shape[1]
    with vcast.models.attach(model, ratio=0.25) as handle:
        sequences, logits = generate(model, inputs)
        stats = handle.stats
    assert stats.timer == "cuda_events" and stats.memory_source == "cuda_max_allocated"
    ref_tokens, ref_logits, _ = reference(model, inputs, stats, handle.adapter.positions)
    assert sequences[:, length:].tolist() == ref_tokens.tolist()
    torch.testing.assert_close(logits.float(), ref_logits.float(), rtol=2e-2, atol=2e-2)
