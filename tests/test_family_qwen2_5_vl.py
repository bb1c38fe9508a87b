"""Qwen2.5-VL in the real transformers classes (tiny random weights, the real processor): what
differs from Qwen3-VL. A video is ONE run of ``T * P`` tokens (the segments must still be its
grid's ``T`` temporal patches of ``P`` tokens, also when ``generate`` drops ``video_grid_thw``),
the temporal MRoPE is absolute time (``second_per_grid_ts``), and the ViT attends within windows
over tokens it reorders window by window (the feature scores must come back in the LLM's order).
FastVID's release for this model ranks by its own saliency (the last block's mean query against
each merge unit's mean key), which the adapter computes for that version only.
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
from tests.support.greedy_reference import assert_hooked_equals_reference, greedy  # noqa: E402
from tests.support.greedy_reference import reference as greedy_reference  # noqa: E402
from tests.model_inputs import FPS, batch, clip  # noqa: E402
from vcast.models.reference import encode, encoder_selection, full_positions, probe_video  # noqa: E402
from vcast.registry import method_inputs, method_params  # noqa: E402
from vcast.tiny_checkpoints import build  # noqa: E402

ARCH = "qwen2_5_vl"
RATIO = 0.25
NEW_TOKENS = 8
# Largest |hooked - reference| logit allowed: fp32 as in tests/test_models_generate.py; bf16 loose
# enough for a different kernel order of equal math (measured: 0 on CPU), far below a changed decision.
TOLERANCE = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    """(fp32 model with SDPA, processor) of the tiny checkpoint, seed 0, in memory."""
    return build(ARCH, "tiny", seed=0)


def generate(model: Any, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return greedy(model, inputs, NEW_TOKENS)


def reference(model: Any, inputs: Any, stats: Any, video_tokens: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    return greedy_reference(model, inputs, stats, NEW_TOKENS, video_tokens)


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
    assert_hooked_equals_reference(model, inputs, method, RATIO, NEW_TOKENS, TOLERANCE[dtype])


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


# FastVID official version="qwen2_5_vl": the release's own saliency through the model ---------------
# T = 4 temporal patches: DySeg's c = 4 (the release's topk(s, c - 1) needs T - 1 >= c - 1).
FASTVID_RELEASE = dict(variant="official", version="qwen2_5_vl", num_segments=4)


def _last_block_qk(model: Any, inputs: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rotated queries, rotated keys ``[N, H, d]`` of the last ViT block, recomputed here from its
    own ``qkv`` weights and rotary inputs in the window order the block sees; the encoder's tokens
    ``[T * P, D]``)."""
    attention = model.model.visual.blocks[-1].attn
    seen: list[tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]] = []
    hook = attention.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append((kwargs.get("hidden_states", args[0] if args else None),
                                                  kwargs["position_embeddings"])), with_kwargs=True)
    try:
        with torch.no_grad():
            tokens = encode(model, inputs)["video"].pooler_output[0]
    finally:
        hook.remove()
    ((hidden, (cos, sin)),) = seen
    heads = attention.num_heads
    with torch.no_grad():
        q, k, _ = torch.nn.functional.linear(hidden, attention.qkv.weight, attention.qkv.bias).view(
            hidden.shape[0], 3, heads, -1).unbind(1)

    def rotate(x: torch.Tensor) -> torch.Tensor:  # in float32, cast back, as the ViT rotates
        half = x.shape[-1] // 2
        turned = torch.cat([-x[..., half:], x[..., :half]], -1).float()
        return (x.float() * cos[:, None].float() + turned * sin[:, None].float()).to(x.dtype)

    return rotate(q), rotate(k), tokens


def _release_saliency(model: Any, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(the release's saliency ``[T, P]`` in the LLM's order, computed in this test; the encoder's
    tokens ``[T, P, D]``): per temporal patch, the mean query against each 2x2 unit's mean key,
    softmax, head mean (FastVID @a40a109 L193-203), then the merger's reverse order (L589-594)."""
    from transformers.vision_utils import get_vision_window_index

    from baselines.fastvid.qwen2_5_vl_saliency import mean_query_saliency

    ((frames, per_frame),) = grid_layout(inputs)
    q, k, tokens = _last_block_qk(model, inputs)
    window_order = mean_query_saliency(q, k, frames)  # the units in the order the block sees them
    vision = model.config.vision_config
    index, _ = get_vision_window_index(inputs["video_grid_thw"], vision.spatial_merge_size, vision.window_size,
                                       vision.patch_size)
    raster = window_order.reshape(-1)[torch.argsort(index)].view(frames, per_frame)
    # The same numbers written another way (einsum over heads), so the helper is not graded by itself.
    heads, dim = q.shape[1], q.shape[2]
    mean_q = q.float().view(frames, -1, heads, dim).mean(1)  # [T, H, d]
    unit_k = k.float().view(frames, per_frame, 4, heads, dim).mean(2)  # [T, P, H, d]
    again = (torch.einsum("thd,tphd->thp", mean_q, unit_k) / dim**0.5).softmax(-1).mean(1)
    torch.testing.assert_close(window_order.float(), again, rtol=2e-2 if q.dtype == torch.bfloat16 else 1e-5,
                               atol=1e-3 if q.dtype == torch.bfloat16 else 1e-7)
    assert not torch.equal(raster.reshape(-1), window_order.reshape(-1))  # the windows do reorder the units
    return raster, tokens.view(frames, per_frame, -1)


def test_fastvid_qwen2_5_vl_needs_the_release_saliency_only() -> None:
    """Only official version="qwen2_5_vl" asks the model for the mean-query saliency (and then not
    for the column means); the other versions and variants keep theirs."""
    assert method_inputs("fastvid", **FASTVID_RELEASE) == ("vision_mean_query_attention",)
    assert method_inputs("fastvid", variant="official", version="llava_video") == ("vision_attention",)
    assert method_inputs("fastvid", variant="official") == method_inputs("fastvid") == ("vision_attention",)
    assert method_inputs("fastvid", variant="vidcom2_qwen") == ()
    assert "vision_mean_query_attention" not in method_params("fastvid")  # a model input, not a parameter


def test_fastvid_qwen2_5_vl_gets_the_release_saliency_through_the_model(tiny: tuple[Any, Any],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under attach, FastVID official version="qwen2_5_vl" is fed the last block's mean-query saliency
    in the LLM's order (computed here from the block's own weights), not the column mean the other
    methods get; the hooked run keeps (and merges into) exactly the tokens the compressor chooses on
    the encoder's own tokens with that saliency, and generates what the pruned prompt fed without
    hooks generates."""
    import baselines.fastvid.method as fastvid

    model, processor = tiny
    inputs = batch(ARCH, processor, ["What moves?"], [clip(8, 128)])
    ((frames, per_frame),) = grid_layout(inputs)
    length = inputs["input_ids"].shape[1]
    saliency, tokens = _release_saliency(model, inputs)
    expected = vcast.select(tokens, RATIO, method="fastvid", vision_mean_query_attention=saliency, **FASTVID_RELEASE)
    assert expected.merges and 0 < expected.keep.numel() < frames * per_frame

    fed, official = [], fastvid.official_select

    def spy(frames: torch.Tensor, ratio: float, version: str, given: torch.Tensor, **rest: Any) -> Any:
        fed.append(given.clone())  # what our own dispatch hands the release's compressor
        return official(frames, ratio, version, given, **rest)

    with vcast.models.attach(model, "fastvid", RATIO, **FASTVID_RELEASE) as handle:
        assert handle._probe.mean_query and not handle._probe.attention  # no column means computed for it
        monkeypatch.setattr(fastvid, "official_select", spy)  # after attach's own check on a stand-in video
        sequences, logits = generate(model, inputs)
        stats = handle.stats
    (given,) = fed
    assert torch.equal(given, saliency)
    column_means = _scores(model, inputs).attention.view(frames, per_frame)
    assert not torch.allclose(given, column_means, rtol=1e-2, atol=1e-3)  # another input altogether

    (video,) = stats.segments
    assert video.keep.tolist() == expected.keep.tolist() and video.merged
    ref_tokens, ref_logits = reference(model, inputs, stats, expected.tokens)
    assert sequences[:, length:].tolist() == ref_tokens.tolist()
    torch.testing.assert_close(logits, ref_logits, **TOLERANCE[torch.float32])


def test_fastvid_qwen2_5_vl_saliency_keeps_the_bf16_models_dtype(tiny: tuple[Any, Any]) -> None:
    """In a bf16 model the adapter's saliency is the release's bf16 values (computed here), which the
    compressor ranks by as they are (the reference selection reads the same probe as attach)."""
    base, processor = tiny
    model = copy.deepcopy(base).to(torch.bfloat16)
    inputs = batch(ARCH, processor, ["What moves?"], [clip(8, 128)])
    saliency, tokens = _release_saliency(model, inputs)
    probed = _scores(model, inputs).mean_query_attention
    assert probed.dtype == torch.bfloat16 and torch.equal(probed.view_as(saliency), saliency)
    expected = vcast.select(tokens, RATIO, method="fastvid", vision_mean_query_attention=saliency, **FASTVID_RELEASE)
    chosen = encoder_selection(model, inputs, "fastvid", RATIO, **FASTVID_RELEASE)
    assert chosen.keep.tolist() == expected.keep.tolist() and torch.equal(chosen.tokens, expected.tokens)


def test_fastvid_qwen2_5_vl_is_refused_where_no_adapter_computes_its_saliency() -> None:
    """LLaVA-OneVision's adapter (and Qwen3-VL's) does not compute the release's saliency: attach
    refuses the version there, naming the family and the input, and leaves no hook behind."""
    from vcast.families import get_family
    from vcast.models.attached import attached_handle
    from vcast.models.vision_probe import MEAN_QUERY_ATTENTION, supplies

    assert supplies(get_family(ARCH).load("adapter"), MEAN_QUERY_ATTENTION)
    assert not supplies(get_family("qwen3_vl").load("adapter"), MEAN_QUERY_ATTENTION)
    model, _ = build("llava_onevision", "tiny", seed=0)
    with pytest.raises(ValueError, match=r"^LLaVA-OneVision: method 'fastvid' .*'version': 'qwen2_5_vl'.* ranks by "
                                         r"vision_mean_query_attention.*adapters that do: Qwen2\.5-VL\)"):
        vcast.models.attach(model, "fastvid", 0.9, **FASTVID_RELEASE)  # 0.9: attach's stand-in check is quicker
    assert attached_handle(model) is None
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in model.modules())


def test_the_sweep_preflight_refuses_the_release_saliency_where_no_adapter_computes_it() -> None:
    """FastVID official version qwen2_5_vl reads an input only this family's adapter computes: the
    sweep refuses its cells on another family before any job, with attach's reason."""
    from vcast.sweep.cell import CellSpec
    from vcast.sweep.spec import preflight

    def spec(plugin: str) -> CellSpec:
        return CellSpec(experiment="t", model="m", plugin=plugin, pretrained="unused", prompt_key="k", model_args={},
                        method="fastvid", method_id="fastvid", method_params={"version": "qwen2_5_vl"},
                        ratio=RATIO, frames=8, task="vcast_synth", lmms_tasks=["vcast_synth"], variant="official")

    assert preflight(spec("vcast_qwen2_5_vl")) is None
    refusal = preflight(spec("vcast_qwen3_vl"))
    assert refusal is not None and refusal.startswith("Qwen3-VL: method 'fastvid'")
    assert "vision_mean_query_attention" in refusal and "adapters that do: Qwen2.5-VL" in refusal
