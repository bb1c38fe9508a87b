"""Qwen2-VL, the second arch of the Qwen2.5-VL family, in the real transformers classes (tiny random
weights, the real processor): what differs from Qwen2.5-VL. The layout is the same (one run of
``T * P`` tokens per video), but the temporal MRoPE is the temporal patch's index (no
``second_per_grid_ts``), the ViT has no windows (the feature scores come in the encoder's own order,
which is the LLM's) and its blocks are LayerNorm + ``fc1``/``fc2`` (the FLOPs must count that MLP).

The structure and tolerances are Qwen2.5-VL's test's, with 4 new tokens instead of 8 (a second arch
of a tested family: the decoding steps add time, not coverage).
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
from tests.support.greedy_reference import assert_hooked_equals_reference  # noqa: E402
from tests.model_inputs import batch, clip  # noqa: E402
from tests.test_family_qwen2_5_vl import RATIO, TOLERANCE, grid_layout  # noqa: E402
from vcast.models.reference import (  # noqa: E402
    encode,
    full_positions,
    probe_video,
)
from vcast.tiny_checkpoints import build  # noqa: E402

ARCH = "qwen2_vl"
NEW_TOKENS = 4


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    """(fp32 model with SDPA, processor) of the tiny checkpoint, seed 0, in memory."""
    return build(ARCH, "tiny", seed=0)


@pytest.fixture(scope="module")
def in_dtype(tiny: tuple[Any, Any]) -> dict[torch.dtype, Any]:
    """The tiny model in fp32 and (one copy, shared by the bf16 cases) in bf16."""
    return {torch.float32: tiny[0], torch.bfloat16: copy.deepcopy(tiny[0]).to(torch.bfloat16)}


@pytest.fixture(scope="module")
def inputs(tiny: tuple[Any, Any]) -> Any:
    """One 8-frame 128 px clip: 4 temporal patches of 5 x 5 tokens."""
    return batch(ARCH, tiny[1], ["What moves?"], [clip(8, 128)])


def test_the_tiny_checkpoint_is_qwen2_vl(tiny: tuple[Any, Any], inputs: Any) -> None:
    from transformers import Qwen2VLForConditionalGeneration, Qwen2VLProcessor

    model, processor = tiny
    assert type(model) is Qwen2VLForConditionalGeneration and type(processor) is Qwen2VLProcessor
    assert not hasattr(model.model.visual, "window_size")  # nothing to reorder in the ViT
    assert "second_per_grid_ts" not in inputs  # relative time: the processor gives no seconds


def test_segments_are_the_grids_temporal_patches_at_their_index(tiny: tuple[Any, Any], inputs: Any) -> None:
    """generate (no video_grid_thw at the prefill: T and P from the positions) and a plain forward
    both cut the video's one run into its grid's T x P; the temporal row steps by 1 per patch."""
    model, _ = tiny
    ((frames, per_frame),) = grid_layout(inputs)
    assert (frames, per_frame) == (4, 25)
    columns = (inputs["input_ids"][0] == model.config.video_token_id).nonzero().squeeze(1)
    assert columns.tolist() == list(range(int(columns[0]), int(columns[0]) + frames * per_frame))  # one run
    temporal = full_positions(model, inputs)[1, 0, columns].view(frames, per_frame)
    start = int(temporal[0, 0])
    assert temporal.tolist() == [[start + t] * per_frame for t in range(frames)]
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("method", ["vcast", "visionzip"])
def test_hooked_generate_equals_the_hook_free_reference(in_dtype: dict[torch.dtype, Any], inputs: Any, method: str,
                                                        dtype: torch.dtype) -> None:
    """vcast, and VisionZip (merging; reads the ViT's feature-layer attention and keys): the same
    tokens and (nearly) the same logits as the pruned prompt fed without hooks at its original
    positions (the temporal patches' indices)."""
    model = in_dtype[dtype]
    assert {p.dtype for p in model.parameters()} == {dtype}
    assert_hooked_equals_reference(model, inputs, method, RATIO, NEW_TOKENS, TOLERANCE[dtype])


def test_feature_scores_are_the_last_blocks_attention_in_llm_order(tiny: tuple[Any, Any], inputs: Any) -> None:
    """Computed here from the last block's own inputs (a forward pre-hook on this instance), one
    softmax per temporal patch: the column mean over heads and queries, averaged over each merge
    unit's 4 consecutive patches, in the encoder's order, which is the merger's and so the LLM's
    (a window reorder would permute it). Keys: the head mean before the rotary embedding."""
    import transformers.models.qwen2_vl.modeling_qwen2_vl as modeling

    model, _ = tiny
    attention = model.model.visual.blocks[-1].attn
    seen: dict[str, Any] = {}

    def grab(module: Any, args: tuple, kwargs: dict) -> None:
        seen.update(hidden=args[0] if args else kwargs["hidden_states"], **kwargs)

    hook = attention.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        _, records = probe_video(model, inputs)
    finally:
        hook.remove()
    (record,) = records
    ((frames, per_frame),) = grid_layout(inputs)
    assert record.units == [(frames, per_frame)]

    hidden, (cos, sin) = seen["hidden"], seen["position_embeddings"]
    q, k, _ = attention.qkv(hidden).reshape(hidden.shape[0], 3, attention.num_heads, -1).unbind(1)  # [N, H, d]
    rotated_q, rotated_k = modeling.apply_rotary_pos_emb_vision(q, k, cos, sin)
    patches = per_frame * 4
    columns = []
    for t in range(frames):  # cu_seqlens: each temporal patch attends to itself only
        rows = slice(t * patches, (t + 1) * patches)
        scores = torch.einsum("qhd,khd->hqk", rotated_q[rows].float(), rotated_k[rows].float()) * attention.scaling
        columns.append(scores.softmax(-1).mean((0, 1)))
    expected = torch.cat(columns).view(-1, 4).mean(-1)
    torch.testing.assert_close(record.attention, expected, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(record.attention.view(frames, -1).sum(-1) * 4, torch.ones(frames))
    torch.testing.assert_close(record.keys, k.float().mean(1).view(-1, 4, k.shape[-1]).mean(1), rtol=1e-5, atol=1e-6)


def test_vision_flops_count_the_fc_mlp_and_full_attention(tiny: tuple[Any, Any]) -> None:
    """torch's FLOP counter on the encoder (eager attention, a video and an image of a non-square
    grid) equals the family's formula for Qwen2-VL exactly, also for bare (t, p) units."""
    from torch.utils.flop_counter import FlopCounterMode

    from vcast.models.flops import call_prefill_flops, vision_units

    base, processor = tiny
    model = copy.deepcopy(base)
    model.model.visual.config._attn_implementation = "eager"
    image = np.random.default_rng(0).integers(0, 255, (150, 100, 3), dtype=np.uint8)
    given = batch(ARCH, processor, ["What is it?"], [clip(8, 128)], images=[image])
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        encode(model, given)
    counted = sum(counter.get_flop_counts()["Global"].values())
    units = vision_units(model.config, given)
    assert [tuple(u) for u in units] == [(4, 100), (1, 80)]  # 10 x 10 and 10 x 8 patches
    assert call_prefill_flops(model.config, units, []).vision == counted
    assert call_prefill_flops(model.config, [(4, 100), (1, 80)], []).vision == counted


def test_the_published_config_builds() -> None:
    from transformers import Qwen2VLConfig

    from vcast.families import get_family

    family = get_family("qwen2_5_vl")
    assert family.published_model("qwen2_vl_7b").arch == ARCH
    config = Qwen2VLConfig(**family.load("real_size")(ARCH))
    text, vision = config.text_config, config.vision_config
    assert (text.hidden_size, text.num_hidden_layers, text.num_key_value_heads, text.intermediate_size) == (3584, 28, 4,
                                                                                                          18944)
    assert text.vocab_size == 152064
    assert sum(text.rope_parameters["mrope_section"]) == text.hidden_size // text.num_attention_heads // 2
    assert (vision.depth, vision.embed_dim, vision.embed_dim * vision.mlp_ratio, vision.hidden_size) == (32, 1280, 5120,
                                                                                                       3584)
    assert (config.video_token_id, vision.hidden_act) == (151656, "quick_gelu")
