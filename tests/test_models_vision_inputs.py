"""The vision-encoder inputs the adapters supply (``vcast.models.vision_probe``) equal a naive
computation from the real models: attention column means of the feature layer and its keys,
pooled onto the LLM token grid, while the encoder itself keeps SDPA."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from transformers import AutoModelForImageTextToText, AutoProcessor  # noqa: E402

from tests.model_inputs import batch, clip, probe_video  # noqa: E402
from vcast.models.attach import adapter_class  # noqa: E402
from vcast.models.vision_probe import column_mean_attention, inputs_for_videos  # noqa: E402

NEEDED = ("grid", "vision_attention", "vision_keys")


def load(path: Path, attn: str) -> tuple[Any, Any]:
    model = AutoModelForImageTextToText.from_pretrained(path, attn_implementation=attn).eval()
    return model, AutoProcessor.from_pretrained(path)


def test_column_mean_attention_equals_the_full_softmax_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 10, 4, generator=generator), torch.randn(2, 3, 10, 4, generator=generator)
    full = torch.softmax(q @ k.transpose(-1, -2) * 0.5, dim=-1).mean(dim=(1, 2))
    monkeypatch.setattr("vcast.models.vision_probe.CHUNK_ELEMENTS", 2 * 3 * 10 * 3)  # 3 query rows per chunk
    torch.testing.assert_close(column_mean_attention(q, k, 0.5), full)
    torch.testing.assert_close(column_mean_attention(q, k, 0.5).sum(-1), torch.ones(2))  # each row is a distribution


def test_llava_attention_equals_eager_siglip_weights(tiny_dirs: dict[str, Path]) -> None:
    """The eager SigLIP layer returns its real weights: their column mean, pooled by the model's own
    2-D pooling, is what the probe computed from the layer's input."""
    model, processor = load(tiny_dirs["llava_onevision"], "eager")
    inputs = batch("llava_onevision", processor, ["What moves?"], [clip()])
    adapter = adapter_class(model)(model, None, False)
    captured = {}
    hook = adapter.feature_attention().register_forward_hook(lambda m, a, k, out: captured.update(weights=out[1]),
                                                             with_kwargs=True)
    try:
        pooled, records = probe_video(model, inputs)
    finally:
        hook.remove()
    weights = captured["weights"]  # [F, H, n, n]
    frames = weights.shape[0]
    expected = model.model.apply_pooling(weights.float().mean(dim=(1, 2))[..., None]).reshape(frames, -1)
    per_frame = adapter.tokens_per_frame
    (item,) = inputs_for_videos(records, [(frames, per_frame)], NEEDED, adapter.family)
    torch.testing.assert_close(item["vision_attention"], expected, rtol=1e-5, atol=1e-7)
    side = round(per_frame**0.5)
    assert item["grid"] == (side, side)
    assert item["vision_keys"].shape[:2] == (frames, per_frame)
    assert pooled.shape[1] == frames * per_frame + 1  # the probe's grid is the features' grid (+ newline)


@pytest.mark.parametrize("arch", ["qwen3_vl", "qwen3_vl_moe"])
def test_qwen_attention_equals_a_naive_recomputation_of_the_last_block(arch: str, tiny_dirs: dict[str, Path]) -> None:
    """Naive per-frame softmax of the last block's rotated q, k: it reproduces the block's real
    output (so it is the attention the model computed), and its column means, averaged over each
    2x2 merge unit (4 consecutive patches), are the probe's values."""
    import sys

    model, processor = load(tiny_dirs[arch], "sdpa")
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    attention_module = model.model.visual.blocks[-1].attn
    captured: dict[str, Any] = {}

    def keep(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        captured.update(hidden=kwargs.get("hidden_states", args[0] if args else None), kwargs=kwargs, output=output)

    hook = attention_module.register_forward_hook(keep, with_kwargs=True)
    try:
        pooled, records = probe_video(model, inputs)
    finally:
        hook.remove()
    hidden, kwargs = captured["hidden"], captured["kwargs"]
    n, heads = hidden.shape[0], attention_module.num_heads
    q, k, v = attention_module.qkv(hidden).reshape(n, 3, heads, -1).unbind(1)
    rotary = sys.modules[type(attention_module).__module__].apply_rotary_pos_emb_vision
    q, k_rot = rotary(q, k, *kwargs["position_embeddings"])
    bounds = kwargs["cu_seqlens"].tolist()
    outputs, column_means = [], []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        weights = torch.softmax(torch.einsum("ihd,jhd->hij", q[start:stop], k_rot[start:stop]).float()
                                * attention_module.scaling, dim=-1)
        outputs.append(torch.einsum("hij,jhd->ihd", weights, v[start:stop].float()).reshape(stop - start, -1))
        column_means.append(weights.mean(dim=(0, 1)))
    torch.testing.assert_close(attention_module.proj(torch.cat(outputs)), captured["output"], rtol=1e-4, atol=1e-5)

    grid_t, grid_h, grid_w = inputs["video_grid_thw"][0].tolist()
    merge = model.config.vision_config.spatial_merge_size
    per_frame = grid_h * grid_w // merge**2
    (item,) = inputs_for_videos(records, [(grid_t, per_frame)], NEEDED, arch)
    expected = torch.cat(column_means).view(-1, merge**2).mean(-1).view(grid_t, per_frame)
    torch.testing.assert_close(item["vision_attention"], expected, rtol=1e-5, atol=1e-7)
    expected_keys = k.float().mean(1).view(-1, merge**2, k.shape[-1]).mean(1).view(grid_t, per_frame, -1)
    torch.testing.assert_close(item["vision_keys"], expected_keys)
    assert item["grid"] == (grid_h // merge, grid_w // merge)
    assert pooled[0].shape[0] == grid_t * per_frame


def test_a_video_the_encoder_never_saw_is_refused(tiny_dirs: dict[str, Path]) -> None:
    model, processor = load(tiny_dirs["qwen3_vl"], "sdpa")
    inputs = batch("qwen3_vl", processor, ["What moves?"], [clip()])
    _, records = probe_video(model, inputs)
    with pytest.raises(ValueError, match="no encoder call of this prompt encoded its videos"):
        inputs_for_videos(records, [(7, 5)], NEEDED, "Qwen3-VL")
