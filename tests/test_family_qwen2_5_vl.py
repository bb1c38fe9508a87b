"""Qwen2.5-VL in the real transformers classes (tiny random weights, the real processor): what
differs from Qwen3-VL. A video is ONE run of ``T * P`` tokens (the segments must still be its
grid's ``T`` temporal patches of ``P`` tokens, also when ``generate`` drops ``video_grid_thw``),
the temporal MRoPE is absolute time (``second_per_grid_ts``), and the ViT attends within windows
over tokens it reorders window by window (the feature scores must come back in the LLM's order).
"""

from __future__ import annotations

import copy
import os
from typing import Any

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import vcast  # noqa: E402
from tests.model_inputs import FPS, batch, clip  # noqa: E402
from vcast.models.reference import encode, encoder_selection, full_positions, probe_video, pruned_inputs, survivors  # noqa: E402
from vcast.tiny_checkpoints import build  # noqa: E402

ARCH = "qwen2_5_vl"
RATIO = 0.25
NEW_TOKENS = 8
GREEDY = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
              return_dict_in_generate=True, output_logits=True)
# Largest |hooked - reference| logit allowed: fp32 as in tests/test_models_generate.py; bf16 loose
# enough for a different kernel order of equal math (measured: 0 on CPU), far below a changed decision.
TOLERANCE = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    """(fp32 model with SDPA, processor) of the tiny checkpoint, seed 0, in memory."""
    return build(ARCH, "tiny", seed=0)


def generate(model: Any, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        out = model.generate(**inputs, **GREEDY)
    return out.sequences, torch.stack(out.logits)


def reference(model: Any, inputs: Any, stats: Any, video_tokens: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """New tokens and logits of the pruned prompt fed to the model without hooks."""
    with torch.no_grad():
        kwargs = pruned_inputs(model, inputs, encode(model, inputs), survivors(stats, inputs["input_ids"]),
                               video_tokens=video_tokens)
    sequences, logits = generate(model, kwargs)
    return sequences[:, kwargs["input_ids"].shape[1]:], logits


def grid_layout(inputs: Any) -> list[tuple[int, int]]:
    return [(t, h * w // 4) for t, h, w in inputs["video_grid_thw"].tolist()]


def test_segments_are_the_grids_temporal_patches(tiny: tuple[Any, Any]) -> None:
    """generate (encoder outputs precomputed, no video_grid_thw at the prefill: T and P from the
    positions) and a plain forward (the grid given) both cut each video's one run into its grid's
    T x P; two videos of different grids in one prompt too."""
    model, processor = tiny
    inputs = batch(ARCH, processor, ["What moves?"], [clip(8, 128)])
    ((frames, per_frame),) = grid_layout(inputs)
    assert (frames, per_frame) == (4, 25)
    video_id = model.config.video_token_id
    columns = (inputs["input_ids"][0] == video_id).nonzero().squeeze(1)
    assert columns.tolist() == list(range(int(columns[0]), int(columns[0]) + frames * per_frame))  # one run
    with vcast.models.attach(model, ratio=RATIO) as handle:
        model.generate(**inputs, max_new_tokens=1, do_sample=False)
        (by_generate,) = handle.stats.segments
        with torch.no_grad():
            model(**inputs)
        (by_forward,) = handle.stats.segments
    for segment in (by_generate, by_forward):
        assert (segment.frames, segment.tokens_per_frame) == (frames, per_frame)
        assert segment.positions.tolist() == columns.tolist()
        assert segment.kept == int(RATIO * frames * per_frame)

    # Two videos in one prompt, with the tiny checkpoint's own pixel budget (16 tokens a frame at most).
    videos = [clip(8, 128, seed=1), clip(4, 96, seed=2)]
    content = [{"type": "video"}, {"type": "video"}, {"type": "text", "text": "Same?"}]
    text = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                         tokenize=False)
    from transformers.video_utils import VideoMetadata

    metadata = [VideoMetadata(total_num_frames=len(v), fps=FPS, frames_indices=list(range(len(v)))) for v in videos]
    two = processor(text=[text], videos=videos, video_metadata=metadata, return_tensors="pt")
    assert grid_layout(two) == [(4, 16), (2, 9)]
    with vcast.models.attach(model, ratio=RATIO) as handle:
        model.generate(**two, max_new_tokens=1, do_sample=False)
        assert [(s.frames, s.tokens_per_frame) for s in handle.stats.segments] == [(4, 16), (2, 9)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("method", ["vcast", "visionzip"])
def test_hooked_generate_equals_the_hook_free_reference(tiny: tuple[Any, Any], method: str,
                                                        dtype: torch.dtype) -> None:
    """vcast, and VisionZip (merging; reads the windowed ViT's feature-layer attention and keys):
    the same tokens and (nearly) the same logits as the pruned prompt fed without hooks."""
    model, processor = tiny
    if dtype != torch.float32:
        model = copy.deepcopy(model).to(dtype)
    assert {p.dtype for p in model.parameters()} == {dtype}
    inputs = batch(ARCH, processor, ["What moves?"], [clip(8, 128)])
    length = inputs["input_ids"].shape[1]
    expected = encoder_selection(model, inputs, method, RATIO)
    with vcast.models.attach(model, method, RATIO) as handle:
        sequences, logits = generate(model, inputs)
        stats = handle.stats
    (video,) = stats.segments
    assert video.keep.tolist() == expected.keep.tolist() and video.merged == expected.merges
    assert video.kept < video.total
    tokens, ref_logits = reference(model, inputs, stats, expected.tokens if expected.merges else None)
    assert sequences[:, length:].tolist() == tokens.tolist()
    assert logits.dtype == ref_logits.dtype
    torch.testing.assert_close(logits.float(), ref_logits.float(), **TOLERANCE[dtype])


def test_the_kept_tokens_mrope_follows_second_per_grid_ts(tiny: tuple[Any, Any]) -> None:
    """The temporal row steps by tokens_per_second * second_per_grid_ts per temporal patch; pruning
    keeps it: a clip said to be 3x slower moves the kept tokens (other logits), and the hooked
    model follows it exactly as the reference does."""
    model, processor = tiny
    inputs = batch(ARCH, processor, ["What moves?"], [clip(8, 128)])
    assert inputs["second_per_grid_ts"].tolist() == [2 / FPS]  # temporal patch 2 / 4 fps
    columns = (inputs["input_ids"][0] == model.config.video_token_id).nonzero().squeeze(1)
    step = model.config.vision_config.tokens_per_second * 3 * 2 / FPS
    slow = dict(inputs, second_per_grid_ts=inputs["second_per_grid_ts"] * 3)
    (frames, per_frame), = grid_layout(inputs)
    temporal = full_positions(model, slow)[1, 0, columns].view(frames, per_frame)
    start = int(temporal[0, 0])
    assert temporal.tolist() == [[start + int(t * step)] * per_frame for t in range(frames)]

    results = {}
    for name, given in (("real", inputs), ("slow", slow)):
        with vcast.models.attach(model, ratio=RATIO) as handle:
            sequences, logits = generate(model, given)
            stats = handle.stats
        tokens, ref_logits = reference(model, given, stats)
        assert sequences[:, given["input_ids"].shape[1]:].tolist() == tokens.tolist()
        torch.testing.assert_close(logits, ref_logits, rtol=1e-4, atol=1e-5)
        results[name] = (stats.segments[0].keep, ref_logits)
    assert torch.equal(results["real"][0], results["slow"][0])  # the same tokens kept, at other positions:
    with pytest.raises(AssertionError):  # the equality above would catch a hook that ignored second_per_grid_ts
        torch.testing.assert_close(results["real"][1], results["slow"][1], rtol=1e-4, atol=1e-5)


def _scores(model: Any, inputs: Any) -> Any:
    _, records = probe_video(model, inputs)
    (record,) = records
    return record


def test_feature_scores_come_back_in_the_llm_order(tiny: tuple[Any, Any]) -> None:
    """With every block full attention, windows only reorder the tokens: the scores in LLM order
    must not depend on the window size. With the feature layer windowed, they are the column means
    of the attention the layer computes (eager weights), and each frame's still sum to 1."""
    import transformers.models.qwen2_5_vl.modeling_qwen2_5_vl as modeling

    base, processor = tiny
    inputs = batch(ARCH, processor, ["What moves?"], [clip(8, 128)])
    ((frames, per_frame),) = grid_layout(inputs)
    model = copy.deepcopy(base)
    visual = model.model.visual
    visual.fullatt_block_indexes = list(range(len(visual.blocks)))
    found = []
    for window in (56, 14 * 2 * 16):  # 2x2 merge units a window, then one window a frame (no reordering)
        visual.window_size = window
        record = _scores(model, inputs)
        assert record.units == [(frames, per_frame)]
        found.append(record)
    torch.testing.assert_close(found[0].attention, found[1].attention, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(found[0].keys, found[1].keys, rtol=1e-5, atol=1e-6)

    visual.fullatt_block_indexes, visual.window_size = [0], 56  # the feature (last) layer windowed
    visual.config._attn_implementation = "eager"
    weights, original = [], modeling.eager_attention_forward

    def spy(module: Any, *args: Any, **kwargs: Any) -> Any:
        output, attention = original(module, *args, **kwargs)
        if module is visual.blocks[-1].attn:
            weights.append(attention.float())
        return output, attention

    modeling.eager_attention_forward = spy
    try:
        record = _scores(model, inputs)
    finally:
        modeling.eager_attention_forward = original
    assert len(weights) > frames  # windows, not frames
    patches = per_frame * 4
    window_order = torch.cat([w[0].mean((0, 1)) * w.shape[-1] / patches for w in weights]).view(-1, 4).mean(-1)
    from transformers.vision_utils import get_vision_window_index

    index, _ = get_vision_window_index(inputs["video_grid_thw"], 2, 56, 14)
    torch.testing.assert_close(record.attention, window_order[torch.argsort(index)], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(record.attention.view(frames, -1).sum(-1) * 4, torch.ones(frames))


def test_vision_flops_count_the_windows_as_the_encoder_runs_them(tiny: tuple[Any, Any]) -> None:
    """torch's FLOP counter on the encoder (eager attention, windowed and full blocks, a video and
    an image of a non-square grid) equals the family's formula exactly."""
    from torch.utils.flop_counter import FlopCounterMode

    from vcast.models.flops import call_prefill_flops, vision_units

    base, processor = tiny
    model = copy.deepcopy(base)
    model.model.visual.config._attn_implementation = "eager"
    image = np.random.default_rng(0).integers(0, 255, (150, 100, 3), dtype=np.uint8)
    inputs = batch(ARCH, processor, ["What is it?"], [clip(8, 128)], images=[image])
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        encode(model, inputs)
    counted = sum(counter.get_flop_counts()["Global"].values())
    units = vision_units(model.config, inputs)
    assert [tuple(u) for u in units] == [(4, 100), (1, 80)]  # 10 x 10 and 10 x 8 patches
    assert call_prefill_flops(model.config, units, []).vision == counted


def test_the_published_config_builds() -> None:
    from transformers import Qwen2_5_VLConfig

    from vcast.families import get_family

    config = Qwen2_5_VLConfig(**get_family(ARCH).load("real_size")(ARCH))
    text, vision = config.text_config, config.vision_config
    assert (text.hidden_size, text.num_hidden_layers, text.num_key_value_heads) == (3584, 28, 4)
    assert text.vocab_size == 152064
    assert sum(text.rope_parameters["mrope_section"]) == text.hidden_size // text.num_attention_heads // 2
    assert (vision.depth, vision.window_size, list(vision.fullatt_block_indexes)) == (32, 112, [7, 15, 23, 31])
    assert (config.video_token_id, vision.tokens_per_second, vision.out_hidden_size) == (151656, 2, 3584)
