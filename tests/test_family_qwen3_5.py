"""Qwen3.5 (dense and MoE): pruning before a hybrid language model (Gated DeltaNet + gated softmax
attention) equals the pruned prompt fed to an untouched model, in float32 and bfloat16; a
left-padded batch equals each sample alone; on the 4-layer tiny model (its one softmax layer is the
last) every in-LLM method is refused with the reason (``test_hybrid_llm_methods.py`` runs those that
apply on an 8-layer one); the FLOPs count linear-attention layers by their own formula.

The models are the tiny random-weight checkpoints of the real transformers classes, built in
memory (:func:`vcast.tiny_checkpoints.build`), with the real processors and a generated clip.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import vcast  # noqa: E402
from tests.support.greedy_reference import greedy  # noqa: E402
from tests.model_inputs import batch, clip  # noqa: E402
from vcast.families import family_of, get_family  # noqa: E402
from vcast.models.attached import attached_handle  # noqa: E402
from vcast.models.flops import (  # noqa: E402
    LLMShape,
    attention_core_flops,
    attention_projection_flops,
    call_prefill_flops,
    layer_flops,
    linear_attention_flops,
    lm_head_flops,
    mlp_flops,
    vision_units,
)
from vcast.models.hybrid_methods import llm_method_refusal  # noqa: E402
from vcast.models.reference import encode, encoder_selection, pruned_inputs, survivors  # noqa: E402
from vcast.registry import is_llm_method  # noqa: E402
from vcast.tiny_checkpoints import build  # noqa: E402

ARCHS = ("qwen3_5", "qwen3_5_moe")
RATIO = 0.25
NEW_TOKENS = 8
LLM_METHODS = [name for name in vcast.available_methods() if is_llm_method(name)]


@pytest.fixture(scope="module")
def tiny() -> dict[str, tuple[Any, Any]]:
    """Per arch: (model, processor), seed 0, float32."""
    return {arch: build(arch, "tiny", seed=0) for arch in ARCHS}


def generate(model: Any, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return greedy(model, inputs, NEW_TOKENS)


def test_the_tiny_models_keep_the_hybrid_layout(tiny: dict) -> None:
    for arch, (model, _) in tiny.items():
        text = model.config.text_config
        assert text.layer_types == ["linear_attention"] * 3 + ["full_attention"]
        layers = model.model.language_model.layers
        assert [hasattr(layer, "linear_attn") for layer in layers] == [True, True, True, False]
        attention = layers[3].self_attn
        assert attention.q_proj.out_features == 2 * text.num_attention_heads * text.head_dim  # query + output gate
        assert text.linear_num_value_heads > text.linear_num_key_heads
        assert not hasattr(model.model.visual, "deepstack_merger_list")
        assert family_of(model).name == "qwen3_5" and not family_of(model).deepstack
        if arch == "qwen3_5_moe":
            assert hasattr(layers[0].mlp, "shared_expert") and text.num_experts_per_tok < text.num_experts


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("method", ["vcast", "visionzip"])
@pytest.mark.parametrize("arch", ARCHS)
def test_hooked_generate_equals_the_pruned_prompt(arch: str, method: str, dtype: torch.dtype, tiny: dict) -> None:
    """``generate`` with the hooks (pruned before embedding: every DeltaNet layer builds its state
    from the pruned prompt, decoding continues from it) == an untouched model fed the kept ids, the
    encoder outputs of the kept tokens (VisionZip: its merged tokens written in) and the kept tokens'
    original MRoPE positions. Bit for bit: both run the same computation."""
    model, processor = tiny[arch]
    model = model.to(dtype)
    try:
        inputs = batch(arch, processor, ["What moves?"], [clip()])
        inputs["pixel_values_videos"] = inputs["pixel_values_videos"].to(dtype)
        length = inputs["input_ids"].shape[1]
        with vcast.models.attach(model, method, RATIO) as handle:
            sequences, logits = generate(model, inputs)
            stats = handle.stats
        (video,) = stats.segments
        assert video.kept == int(RATIO * video.total) < video.total
        expected = encoder_selection(model, inputs, method, RATIO)  # what the compressor picks on the encoder's tokens
        assert video.keep.tolist() == expected.keep.tolist() and video.merged == expected.merges
        with torch.no_grad():
            kwargs = pruned_inputs(model, inputs, encode(model, inputs), survivors(stats, inputs["input_ids"]),
                                   handle.adapter.positions, video_tokens=expected.tokens if expected.merges else None)
        ref_sequences, ref_logits = generate(model, kwargs)
        kept = kwargs["input_ids"].shape[1]
        assert kept == stats.tokens_after[0] < length
        assert sequences[:, length:].tolist() == ref_sequences[:, kept:].tolist()
        assert next(model.parameters()).dtype == dtype and torch.equal(logits, ref_logits)
    finally:
        model.to(torch.float32)


@pytest.mark.parametrize("arch", ARCHS)
def test_left_padded_batch_matches_each_sample_alone(arch: str, tiny: dict) -> None:
    """Two clips of different grids: the rows lose different numbers of tokens, so the pruned batch
    is re-padded on the left, and the DeltaNet layers must ignore those pads."""
    model, processor = tiny[arch]
    questions = ["What moves?", "Where does the bright square go, and how fast does it move across the frame?"]
    videos = [clip(8, 128, seed=0), clip(4, 96, seed=1)]
    both = batch(arch, processor, questions, videos)
    assert (both["attention_mask"] == 0).any()
    with vcast.models.attach(model, ratio=RATIO) as handle:
        sequences, logits = generate(model, both)
        stats = handle.stats
        pruned_lengths = stats.tokens_after
        for i, (question, video) in enumerate(zip(questions, videos)):
            alone = batch(arch, processor, [question], [video])
            single, single_logits = generate(model, alone)
            assert sequences[i, both["input_ids"].shape[1]:].tolist() == single[0, alone["input_ids"].shape[1]:].tolist()
            torch.testing.assert_close(logits[:, i], single_logits[:, 0], rtol=1e-4, atol=1e-4)
    dropped = [before - after for before, after in zip(stats.tokens_before, pruned_lengths)]
    assert dropped[0] != dropped[1] and all(d > 0 for d in dropped)


# FlashVID has no official defaults for Qwen3.5: its values given, with the stage before the last layer
LLM_PARAMS = {"flashvid": dict(layer=3, llm_retention=0.5, min_segment_num=2, selection="attn_div")}


@pytest.mark.parametrize("method", LLM_METHODS)
def test_in_llm_methods_are_refused_naming_the_family_and_the_reason(method: str, tiny: dict) -> None:
    """Layers 0-2 are linear attention and layer 3, the last, is the only softmax layer: no stage can
    read scores there and drop after it, so no value of any method's layer parameter works."""
    model, _ = tiny["qwen3_5"]
    params = LLM_PARAMS.get(method, {})
    with pytest.raises(ValueError, match=rf"method '{method}'.*Qwen3\.5.*linear attention") as error:
        vcast.models.attach(model, method, 0.5, **params)
    assert "no attention scores" in str(error.value) and "'linear_attention' layer" in str(error.value)
    assert str(error.value).endswith("prune before the language model instead")
    assert str(error.value) == llm_method_refusal("qwen3_5", method, params, ratio=0.5,
                                                  layer_types=model.config.text_config.layer_types)
    hooks = sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())
    assert attached_handle(model) is None and hooks == 0  # refused before any hook was placed


def test_the_refusal_depends_on_the_layers_and_the_parameters() -> None:
    qwen35, qwen3vl = get_family("qwen3_5"), get_family("qwen3_vl")
    assert qwen35.hybrid_attention and not qwen3vl.hybrid_attention
    # without a model's layer types: judged on the published models, with the method's defaults
    refusal = llm_method_refusal(qwen35, "fastv")
    assert "Qwen3.5-27B" in refusal and "layer=4" in refusal
    assert llm_method_refusal("qwen3_5", "pdrop") == llm_method_refusal(qwen35, "pdrop")
    assert llm_method_refusal(qwen35, "fastv", {"layer": 4}) is None  # layer 3 is softmax in both
    assert llm_method_refusal(qwen35, "vcast") is None and llm_method_refusal(qwen35, "visionzip") is None
    assert llm_method_refusal(qwen3vl, "fastv") is None
    assert llm_method_refusal(qwen3vl, "fastv", layer_types=["full_attention"] * 36) is None
    with pytest.raises(ValueError):
        llm_method_refusal(qwen35, "no_such_method")


def test_flops_count_linear_attention_layers_by_their_own_formula(tiny: dict) -> None:
    for arch, (model, processor) in tiny.items():
        config = model.config
        shape = family_of(config).load("flops").llm_shape(config)
        assert shape.linear_layers == frozenset({0, 1, 2}) and shape.attention_gate
        n = 200
        linear, softmax = layer_flops(shape, n, 0), layer_flops(shape, n, 3)
        assert linear != softmax
        assert linear == linear_attention_flops(shape, n) + mlp_flops(shape, n, 0)
        text = config.text_config
        d, h_k, h_v = text.hidden_size, text.linear_num_key_heads, text.linear_num_value_heads
        d_k, d_v, c = text.linear_key_head_dim, text.linear_value_head_dim, text.linear_conv_kernel_dim
        by_hand = (2 * n * d * (2 * h_k * d_k + 2 * h_v * d_v + 2 * h_v) + 2 * n * h_v * d_v * d
                   + 2 * n * c * (2 * h_k * d_k + h_v * d_v) + 2 * n * h_v * (3 * d_k * d_v + 64 * (3 * d_k + 2 * d_v)))
        assert linear_attention_flops(shape, n) == by_hand
        # the gated softmax layer: q_proj also yields the gate (3 h instead of 2 h query-sized widths)
        h, h_kv, d_h = text.num_attention_heads, text.num_key_value_heads, text.head_dim
        assert attention_projection_flops(shape, n) == 2 * n * d * d_h * (3 * h + 2 * h_kv)
        assert softmax == attention_projection_flops(shape, n) + attention_core_flops(shape, n) + mlp_flops(shape, n, 3)
        if arch == "qwen3_5_moe":  # routed top-k experts + the shared expert and its gate, every layer
            m_e, m_s = text.moe_intermediate_size, text.shared_expert_intermediate_size
            assert mlp_flops(shape, n, 0) == (2 * n * d * text.num_experts + 6 * n * d * m_e * text.num_experts_per_tok
                                              + 6 * n * d * m_s + 2 * n * d)
        # both kinds appear in a call's prefill: 3 linear-attention layers, 1 softmax layer, the LM head
        inputs = batch(arch, processor, ["What moves?"], [clip()])
        units = vision_units(config, inputs)
        assert units == [(4, 64)]
        flops = call_prefill_flops(config, units, [[n] * 4])
        assert flops.llm == 3 * linear + softmax + lm_head_flops(shape)
        assert flops.vision > 0
        # a plain softmax shape of the same config would count every layer as softmax attention
        plain = LLMShape.from_config(config)
        assert plain.linear_layers == shape.linear_layers and not plain.attention_gate


def test_the_published_configs_build() -> None:
    from transformers import AutoConfig

    family = get_family("qwen3_5")
    real_config = family.load("real_size")
    for published in family.published:
        spec = real_config(published.arch)
        config = AutoConfig.for_model(published.arch, **spec)
        text = config.text_config
        assert text.layer_types.count("full_attention") * 4 == text.num_hidden_layers
        assert config.vision_config.out_hidden_size == text.hidden_size
        assert family.load("flops").llm_shape(spec) == family.load("flops").llm_shape(config)
    dense = real_config("qwen3_5")["text_config"]
    assert (dense["hidden_size"], dense["num_hidden_layers"], dense["linear_num_value_heads"]) == (5120, 64, 48)
    moe = real_config("qwen3_5_moe")["text_config"]
    assert (moe["hidden_size"], moe["num_hidden_layers"], moe["num_experts"], moe["num_experts_per_tok"]) == (
        2048, 40, 256, 8)


@pytest.mark.parametrize("arch", ARCHS)
def test_torch_flop_counter_agrees_where_the_conventions_meet(arch: str) -> None:
    """torch.utils.flop_counter on the real prefill (eager attention and experts): the vision path,
    the gated softmax layer and every MLP (MoE: routed + shared expert) agree exactly. On a DeltaNet
    layer the counter sees the projections exactly; its convolution and delta rule run on the
    sequence padded (to ``n + c - 1`` outputs, to a multiple of the chunk), and it has no formula for
    the triangular solves: with those three differences the counts agree exactly too."""
    from torch.utils.flop_counter import FlopCounterMode

    model, processor = build(arch, "tiny", seed=0)
    model.set_attn_implementation("eager")
    model.set_experts_implementation("eager")
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(**inputs, logits_to_keep=1)
    counted = {name: ops for name, ops in counter.get_flop_counts().items()}
    top, n = type(model).__name__, int(inputs["attention_mask"].sum())
    shape = family_of(model).load("flops").llm_shape(model.config)
    prefix = f"{top}.model.language_model.layers"
    assert call_prefill_flops(model.config, vision_units(model.config, inputs), []).vision == sum(
        counted[f"{top}.model.visual"].values())
    assert sum(counted[f"{prefix}.3.self_attn"].values()) == attention_projection_flops(shape, n) + attention_core_flops(shape, n)
    for layer in range(4):
        assert sum(counted[f"{prefix}.{layer}.mlp"].values()) == mlp_flops(shape, n, layer)
    text = model.config.text_config
    d, h_k, h_v = text.hidden_size, text.linear_num_key_heads, text.linear_num_value_heads
    d_k, d_v, c, chunk = text.linear_key_head_dim, text.linear_value_head_dim, text.linear_conv_kernel_dim, 64
    ops = {str(op): flops for op, flops in counted[f"{prefix}.0.linear_attn"].items()}
    projections = 2 * n * d * (2 * h_k * d_k + 2 * h_v * d_v + 2 * h_v) + 2 * n * h_v * d_v * d
    convolution = 2 * n * c * (2 * h_k * d_k + h_v * d_v)
    delta_rule = 2 * n * h_v * (3 * d_k * d_v + chunk * (3 * d_k + 2 * d_v))
    assert linear_attention_flops(shape, n) == projections + convolution + delta_rule
    padded = -(-n // chunk) * chunk
    assert ops["aten.mm"] == projections
    assert ops["aten.convolution"] == convolution * (n + c - 1) // n
    assert ops["aten.bmm"] == 2 * padded * h_v * (3 * d_k * d_v + chunk * (2 * d_k + d_v))  # no solves
