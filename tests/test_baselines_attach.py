"""Every baseline inside the real tiny models: ``attach`` + ``generate`` chooses what the compressor
chooses on the encoder's own tokens (with the vision-encoder inputs the adapter supplies), and
decodes exactly like an untouched model fed the pruned (or merged) prompt directly."""

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
from vcast.models.attach import adapter_class  # noqa: E402
from vcast.models.reference import encode, encoder_selection, pruned_inputs, survivors  # noqa: E402
from vcast.registry import is_token_method, method_inputs  # noqa: E402

# Methods that work before the language model (the in-LLM ones: tests/test_baselines_in_llm.py).
BASELINES = [name for name in vcast.available_methods()
             if name not in ("vanilla", "vcast") and is_token_method(name)]
ARCHS = ("qwen3_vl", "llava_onevision", "qwen2_5_vl")
MOE_CASES = ("visionzip", "avgpool_2x2", "vidcom2")  # the MoE shares the Qwen3-VL adapter: a sample
RATIO = 0.25  # the 2x2 methods define their own budget at 0.25
NEW_TOKENS = 4
GREEDY = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
              return_dict_in_generate=True, output_logits=True)


@pytest.fixture(scope="module")
def models(tiny_dirs: dict[str, Path]) -> dict[str, tuple[Any, Any, Any]]:
    """Per architecture: (model, processor inputs of one 8-frame clip, adapter)."""
    loaded = {}
    for arch in (*ARCHS, "qwen3_vl_moe"):
        model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch], attn_implementation="sdpa").eval()
        processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
        loaded[arch] = (model, batch(arch, processor, ["What moves?"], [clip()]), adapter_class(model)(model, None, False))
    return loaded


def expected_selection(model: Any, inputs: Any, adapter: Any, method: str) -> vcast.Selection:
    """The compressor on the encoder's [T, P, D] video tokens, with inputs read by a bare probe."""
    return encoder_selection(model, inputs, method, RATIO)


def generate(model: Any, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        out = model.generate(**inputs, **GREEDY)
    return out.sequences, torch.stack(out.logits)


@pytest.mark.slow
@pytest.mark.parametrize(("method", "arch"), [(m, a) for m in BASELINES for a in ARCHS]
                         + [(m, "qwen3_vl_moe") for m in MOE_CASES])
def test_baseline_in_the_model_equals_the_pruned_prompt(method: str, arch: str, models: dict) -> None:
    model, inputs, adapter = models[arch]
    expected = expected_selection(model, inputs, adapter, method)
    length = inputs["input_ids"].shape[1]
    with vcast.models.attach(model, method, RATIO) as handle:
        sequences, logits = generate(model, inputs)
        stats = handle.stats
    (video,) = stats.segments
    assert video.keep.tolist() == expected.keep.tolist()
    assert video.budgets == expected.budgets.tolist()
    assert video.merged == expected.merges
    assert stats.tokens_after == [length - (video.total - video.kept)]

    with torch.no_grad():
        keep = survivors(stats, inputs["input_ids"])
        kwargs = pruned_inputs(model, inputs, encode(model, inputs), keep, handle.adapter.positions,
                               video_tokens=expected.tokens)
    ref_sequences, ref_logits = generate(model, kwargs)
    assert sequences[:, length:].tolist() == ref_sequences[:, kwargs["input_ids"].shape[1]:].tolist()
    torch.testing.assert_close(logits, ref_logits, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_batch_gives_each_video_its_own_vision_inputs(arch: str, models: dict, tiny_dirs: dict[str, Path]) -> None:
    """Two different clips in one left-padded batch: each sample's selection (VisionZip: attention,
    keys and merged tokens) equals its run alone, so the probe's values are split per video."""
    model, _, _ = models[arch]
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    clips = [clip(frames=8, seed=1), clip(frames=8, seed=2)]
    alone = []
    for one in clips:
        with vcast.models.attach(model, "visionzip", RATIO) as handle:
            generate(model, batch(arch, processor, ["What moves?"], [one]))
            alone.append(handle.stats.segments[0])
    with vcast.models.attach(model, "visionzip", RATIO) as handle:
        generate(model, batch(arch, processor, ["What moves?", "And here?"], clips))
        together = handle.stats.segments
    assert [s.sample for s in together] == [0, 1]
    for single, batched in zip(alone, together):
        assert batched.keep.tolist() == single.keep.tolist() and batched.budgets == single.budgets
    assert alone[0].keep.tolist() != alone[1].keep.tolist()  # the clips differ, so would a mix-up


def test_every_paper_baseline_of_issue_6_is_registered() -> None:
    for name in ("random", "uniform", "random_2x2", "first_2x2", "avgpool_2x2", "visionzip", "vidcom2", "fastvid",
                 "holitom", "dycoke", "prunevid_stage_a", "framefusion_merge"):
        assert name in BASELINES


def test_the_vision_encoder_is_probed_only_for_methods_that_need_it(models: dict) -> None:
    model, _, _ = models["qwen3_vl"]
    for method, probed in (("vcast", False), ("vidcom2", False), ("first_2x2", True), ("holitom", True)):
        with vcast.models.attach(model, method, RATIO) as handle:
            assert (handle._probe is not None) == probed
            assert handle._probe is None or handle._probe.attention == (method == "holitom")


def test_the_vidcom2_qwen_ports_need_no_vision_attention(models: dict) -> None:
    """The Qwen ports rank by token norms: nothing is probed for them (their efficiency figures
    must not pay for an unused attention), while their official variants still probe."""
    model, inputs, _ = models["qwen3_vl"]
    for method in ("visionzip", "fastvid", "holitom"):
        assert method_inputs(method, "vidcom2_qwen") == () and method_inputs(method, "official")
        with vcast.models.attach(model, method, RATIO, variant="vidcom2_qwen") as handle:
            assert handle._probe is None or not handle._probe.attention
        with vcast.models.attach(model, method, RATIO, variant="official") as handle:
            assert handle._probe is not None and handle._probe.attention
    with vcast.models.attach(model, "holitom", RATIO, variant="vidcom2_qwen") as handle:
        generate(model, inputs)
        (video,) = handle.stats.segments
    assert video.merged and video.kept > 0


def test_vision_inputs_are_refused_with_compressed_images(models: dict) -> None:
    model, _, _ = models["qwen3_vl"]
    with pytest.raises(ValueError, match="videos only"):
        vcast.models.attach(model, "visionzip", RATIO, compress_images=True)


def test_model_inputs_are_not_user_parameters(models: dict) -> None:
    model, _, _ = models["qwen3_vl"]
    with pytest.raises(ValueError, match="come from the model"):
        vcast.models.attach(model, "visionzip", RATIO, vision_attention=torch.ones(4, 4))
