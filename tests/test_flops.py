"""Theoretical prefill FLOPs (vcast.models.flops): hand-counted cases, the configs' fields, torch's
own FLOP counter on the tiny models' prefill, the per-layer lengths of in-LLM methods, the plugin's
records and the efficiency table's column."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

import vcast
from vcast.eval.efficiency import CallRecord, summarize
from vcast.models.flops import (
    LLMShape,
    VisionShape,
    attention_core_flops,
    attention_projection_flops,
    call_prefill_flops,
    layer_flops,
    llm_prefill_flops,
    lm_head_flops,
    mlp_flops,
    vision_flops,
    vision_frame_flops,
    vision_units,
)
from vcast.families import family_of
from vcast.registry import is_llm_method

pytest.importorskip("transformers")

from tests.model_inputs import batch, clip  # noqa: E402


def vision_shape(config) -> VisionShape:
    """The vision FLOPs shape of ``config``'s family (its ``flops`` module)."""
    return family_of(config).load("flops").vision_shape(config)

# hidden 8, 1 layer, 2 query heads of 4 (h d_h = d), 1 key/value head, MLP 16, vocabulary 10.
SMALL = LLMShape(hidden=8, layers=1, heads=2, kv_heads=1, head_dim=4, intermediate=16, vocab=10)


def test_one_layer_by_hand() -> None:
    """n = 4 tokens, every matrix product written out (2 FLOPs per multiply-add)."""
    n = 4
    q = 2 * n * 8 * (2 * 4)      # [4, 8] x [8, 8]
    k = v = 2 * n * 8 * (1 * 4)  # [4, 8] x [8, 4]: one key/value head (GQA)
    o = 2 * n * (2 * 4) * 8      # [4, 8] x [8, 8]
    scores = 2 * 2 * n * n * 4   # per query head [4, 4] x [4, 4], the full 4 x 4 matrix
    weighted = 2 * 2 * n * n * 4  # per query head [4, 4] x [4, 4]
    gate = up = 2 * n * 8 * 16
    down = 2 * n * 16 * 8
    head = 2 * 1 * 8 * 10        # the last position only
    assert attention_projection_flops(SMALL, n) == q + k + v + o == 1536
    assert attention_core_flops(SMALL, n) == scores + weighted == 512
    assert mlp_flops(SMALL, n) == gate + up + down == 3072
    assert layer_flops(SMALL, n) == 5120
    assert lm_head_flops(SMALL) == head == 160
    assert llm_prefill_flops(SMALL, n) == 5280
    assert lm_head_flops(SMALL, positions=4) == 4 * head  # a forward that keeps every position's logits


def test_multi_head_attention_is_twice_fastvs_count_and_gqa_saves_the_kv_projections() -> None:
    """FastV counts multiply-adds, ``4nd^2 + 2n^2d + 2ndm`` for a two-matrix MLP: the attention part
    here is twice that; GQA shrinks only k and v."""
    n, d = 6, 8
    mha = LLMShape(hidden=d, layers=1, heads=2, kv_heads=2, head_dim=4, intermediate=16, vocab=10)
    assert attention_projection_flops(mha, n) + attention_core_flops(mha, n) == 2 * (4 * n * d * d + 2 * n * n * d)
    assert attention_projection_flops(mha, n) - attention_projection_flops(SMALL, n) == 2 * (2 * n * d * 4)
    assert attention_core_flops(mha, n) == attention_core_flops(SMALL, n)  # every query head still attends


def test_moe_layers_count_the_router_and_the_active_experts_only() -> None:
    config = {"text_config": {"hidden_size": 8, "num_hidden_layers": 4, "num_attention_heads": 2,
                              "num_key_value_heads": 1, "head_dim": 4, "intermediate_size": 16, "vocab_size": 10,
                              "num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 5,
                              "decoder_sparse_step": 2, "mlp_only_layers": [3]}}
    shape = LLMShape.from_config(config)
    assert shape.moe_layers == {1}  # (i + 1) % 2 == 0 gives 1 and 3; 3 is dense
    n = 4
    router = 2 * n * 8 * 6
    experts = 2 * (3 * 2 * n * 8 * 5)  # two experts per token, each gate + up + down of width 5
    assert mlp_flops(shape, n, layer=1) == router + experts
    assert mlp_flops(shape, n, layer=3) == mlp_flops(shape, n, layer=0) == 6 * n * 8 * 16
    per_layer = [layer_flops(shape, n, layer) for layer in range(4)]
    assert llm_prefill_flops(shape, n) == sum(per_layer) + lm_head_flops(shape)


def test_monotonic_in_length_and_per_layer_schedules_sum() -> None:
    values = [llm_prefill_flops(SMALL, n) for n in range(1, 50)]
    assert all(a < b for a, b in zip(values, values[1:]))
    # the attention term is quadratic: doubling n more than doubles the layer
    assert layer_flops(SMALL, 200) > 2 * layer_flops(SMALL, 100)
    deep = LLMShape(hidden=8, layers=4, heads=2, kv_heads=1, head_dim=4, intermediate=16, vocab=10)
    schedule = [10, 10, 6, 3]  # an in-LLM method dropping tokens after layers 1 and 2
    assert llm_prefill_flops(deep, schedule) == sum(layer_flops(deep, n) for n in schedule) + lm_head_flops(deep)
    assert llm_prefill_flops(deep, 10) == llm_prefill_flops(deep, [10] * 4)
    assert llm_prefill_flops(deep, schedule) < llm_prefill_flops(deep, 10)
    with pytest.raises(ValueError, match="one length per layer"):
        llm_prefill_flops(deep, [10, 10])


def test_vision_encoders_by_hand() -> None:
    # Qwen3-VL: 2 blocks of width 4, MLP 6, patches of 1 channel x 2 frames x 2 x 2 pixels, merge 2,
    # one merger + one DeepStack merger into d = 3; one temporal patch of 8 patches.
    qwen = VisionShape(kind="qwen_vit", hidden=4, depth=2, intermediate=6, patch_values=8, out_hidden=3, merge=2,
                       mergers=2)
    p = 8
    embed = 2 * p * 8 * 4
    block = 2 * p * 4 * 12 + 2 * p * 4 * 4 + 2 * 2 * p * p * 4 + 2 * p * 4 * 6 + 2 * p * 6 * 4  # qkv, proj, attn, MLP
    merger = 2 * 2 * 16 * 16 + 2 * 2 * 16 * 3  # 2 merged tokens of width 16: fc1, fc2
    assert vision_frame_flops(qwen, p) == embed + 2 * block + 2 * merger
    assert vision_flops(qwen, [(3, p), (1, 4)]) == 3 * vision_frame_flops(qwen, p) + vision_frame_flops(qwen, 4)
    # SigLIP + LLaVA's projector: 9 patches of 3 x 2 x 2, width 4, into d = 5.
    siglip = VisionShape(kind="siglip", hidden=4, depth=1, intermediate=6, patch_values=12, out_hidden=5)
    p = 9
    layer = 4 * 2 * p * 4 * 4 + 2 * 2 * p * p * 4 + 2 * p * 4 * 6 + 2 * p * 6 * 4  # q, k, v, o; attn; MLP
    projector = 2 * p * 4 * 5 + 2 * p * 5 * 5
    assert vision_frame_flops(siglip, p) == 2 * p * 12 * 4 + layer + projector


@pytest.fixture(scope="module")
def configs(tiny_dirs: dict) -> dict:
    from transformers import AutoConfig

    return {arch: AutoConfig.from_pretrained(path) for arch, path in tiny_dirs.items()}


def test_the_shapes_read_the_right_config_fields(configs: dict) -> None:
    qwen = configs["qwen3_vl"]
    text, vision = qwen.text_config, qwen.vision_config
    assert LLMShape.from_config(qwen) == LLMShape(
        hidden=text.hidden_size, layers=text.num_hidden_layers, heads=text.num_attention_heads,
        kv_heads=text.num_key_value_heads, head_dim=text.head_dim, intermediate=text.intermediate_size,
        vocab=text.vocab_size)
    assert text.num_key_value_heads < text.num_attention_heads  # the tiny checkpoints use GQA
    assert vision_shape(qwen) == VisionShape(
        kind="qwen_vit", hidden=vision.hidden_size, depth=vision.depth, intermediate=vision.intermediate_size,
        patch_values=vision.in_channels * vision.temporal_patch_size * vision.patch_size**2,
        out_hidden=vision.out_hidden_size, merge=vision.spatial_merge_size,
        mergers=1 + len(vision.deepstack_visual_indexes))
    assert LLMShape.from_config(qwen.to_dict()) == LLMShape.from_config(qwen)  # a plain dict reads the same
    assert vision_shape(qwen.to_dict()) == vision_shape(qwen)

    moe = LLMShape.from_config(configs["qwen3_vl_moe"])
    moe_text = configs["qwen3_vl_moe"].text_config
    assert (moe.experts, moe.experts_per_token, moe.expert_intermediate) == (
        moe_text.num_experts, moe_text.num_experts_per_tok, moe_text.moe_intermediate_size)
    assert moe.moe_layers == set(range(moe_text.num_hidden_layers))  # decoder_sparse_step 1, no dense layers

    llava = configs["llava_onevision"]
    ltext, lvision = llava.text_config, llava.vision_config
    shape = LLMShape.from_config(llava)
    assert (shape.hidden, shape.layers, shape.heads, shape.kv_heads, shape.head_dim, shape.vocab) == (
        ltext.hidden_size, ltext.num_hidden_layers, ltext.num_attention_heads, ltext.num_key_value_heads,
        ltext.hidden_size // ltext.num_attention_heads, ltext.vocab_size)
    assert vision_shape(llava) == VisionShape(
        kind="siglip", hidden=lvision.hidden_size, depth=lvision.num_hidden_layers,
        intermediate=lvision.intermediate_size, patch_values=3 * lvision.patch_size**2, out_hidden=ltext.hidden_size)


# The published Qwen/Qwen3-VL-8B-Instruct config.json (transformers' Qwen3VLConfig defaults differ in
# the text model: 32 layers, 32 key/value heads, MLP 22016, and vision out_hidden_size 3584).
QWEN3_VL_8B = {
    "model_type": "qwen3_vl",
    "text_config": {"hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
                    "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936},
    "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
                      "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 4096,
                      "deepstack_visual_indexes": [8, 16, 24]},
}


def test_qwen3_vl_8b_at_32_frames_matches_the_documented_figures() -> None:
    """docs/models.md: 32 frames of 448 x 448 are 16 temporal patches of 28 x 28 patches, 3136 video
    tokens; with 300 text tokens, vanilla and r = 0.25 (784 video tokens kept before the LLM)."""
    llm, vision = LLMShape.from_config(QWEN3_VL_8B), vision_shape(QWEN3_VL_8B)
    encoder = vision_flops(vision, [(16, 28 * 28)]) / 1e12
    assert encoder == pytest.approx(12.587, abs=5e-4)
    assert llm_prefill_flops(llm, 3136 + 300) / 1e12 == pytest.approx(54.696, abs=5e-4)
    assert llm_prefill_flops(llm, 784 + 300) / 1e12 == pytest.approx(15.753, abs=5e-4)
    assert llm_prefill_flops(llm, 3136) / 1e12 == pytest.approx(49.366, abs=5e-4)
    assert llm_prefill_flops(llm, 784) / 1e12 == pytest.approx(11.255, abs=5e-4)  # 11.2547


def _model(path: Path, arch: str):
    from transformers import AutoModelForImageTextToText

    kwargs = {"attn_implementation": "eager"}
    if arch == "qwen3_vl_moe":  # the grouped-GEMM experts are invisible to torch's FLOP counter
        kwargs["experts_implementation"] = "eager"
    return AutoModelForImageTextToText.from_pretrained(path, **kwargs).eval()


def _counted(model, inputs, generate: bool = False) -> dict[str, int]:
    """FLOPs per module of one prefill (``generate`` of one token runs only the prefill)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        if generate:
            model.generate(**inputs, max_new_tokens=1, do_sample=False)
        else:
            model(**inputs, logits_to_keep=1)
    return {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}


@pytest.mark.parametrize("arch", ["qwen3_vl", "qwen3_vl_moe", "llava_onevision"])
def test_torch_flop_counter_agrees_on_the_tiny_prefill(arch: str, tiny_dirs: dict) -> None:
    """torch.utils.flop_counter on the real forward (eager attention; 2 FLOPs per multiply-add, the
    full score matrix): the vision path and the language model + LM head agree exactly (rel 1e-9)."""
    from transformers import AutoProcessor

    model = _model(tiny_dirs[arch], arch)
    inputs = batch(arch, AutoProcessor.from_pretrained(tiny_dirs[arch]), ["What moves?"], [clip(8, 128)])
    counted = _counted(model, inputs)
    top = type(model).__name__
    if arch == "llava_onevision":
        vision = counted[f"{top}.model.vision_tower"] + counted[f"{top}.model.multi_modal_projector"]
    else:
        vision = counted[f"{top}.model.visual"]
    language = counted[f"{top}.model.language_model"] + counted[f"{top}.lm_head"]
    assert vision + language == counted["Global"]  # nothing else runs a matrix product
    length = int(inputs["attention_mask"].sum())
    layers = model.config.get_text_config().num_hidden_layers
    ours = call_prefill_flops(model.config, vision_units(model.config, inputs), [[length] * layers])
    assert ours.vision == pytest.approx(vision, rel=1e-9) and ours.llm == pytest.approx(language, rel=1e-9)


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
def test_images_count_as_the_encoder_runs_them(arch: str, tiny_dirs: dict) -> None:
    """A batch of a video + image item and an image-only item: Qwen3-VL's image grids, LLaVA's anyres
    crops (as many as each image's size gives) through the encoder and the projector."""
    import numpy as np
    from transformers import AutoProcessor

    model = _model(tiny_dirs[arch], arch)
    image = np.random.default_rng(0).integers(0, 255, (150, 100, 3), dtype=np.uint8)
    inputs = batch(arch, AutoProcessor.from_pretrained(tiny_dirs[arch]), ["What is it?", "And this?"],
                   [clip(8, 128), None], images=[image, image])
    counted = _counted(model, inputs)
    top = type(model).__name__
    vision = sum(counted.get(f"{top}.model.{name}", 0) for name in ("visual", "vision_tower", "multi_modal_projector"))
    units = vision_units(model.config, inputs)
    assert len(units) == (2 if arch == "llava_onevision" else 3)
    assert call_prefill_flops(model.config, units, []).vision == pytest.approx(vision, rel=1e-9)


IN_LLM = [name for name in vcast.available_methods() if is_llm_method(name)]


@pytest.mark.parametrize("method", IN_LLM)
def test_in_llm_layer_lengths_are_what_each_layer_ran(method: str, tiny_dirs: dict) -> None:
    """The stats' per-layer lengths give each decoder layer's counted FLOPs exactly, for every in-LLM
    method (the method's own score rows, computed in its hooks, are not part of any layer)."""
    from transformers import AutoProcessor

    from vcast.models import attach

    model = _model(tiny_dirs["qwen3_vl"], "qwen3_vl")
    inputs = batch("qwen3_vl", AutoProcessor.from_pretrained(tiny_dirs["qwen3_vl"]), ["What moves?"],
                   [clip(8, 128)])
    # PDrop's layer-averaged 25% is unreachable on 3 layers (see baselines/pdrop/): give its lambda.
    handle = attach(model, method, 0.25, **({"lam": 0.5} if method == "pdrop" else {}))
    try:
        counted = _counted(model, inputs, generate=True)
    finally:
        handle.detach()
    shape = LLMShape.from_config(model.config)
    (lengths,) = handle.stats.layer_lengths(shape.layers)
    assert lengths[0] == handle.stats.tokens_after[0] and lengths[-1] < int(inputs["attention_mask"].sum())
    prefix = "Qwen3VLForConditionalGeneration.model.language_model.layers"
    per_layer = [counted[f"{prefix}.{i}"] for i in range(shape.layers)]
    assert per_layer == [layer_flops(shape, n, i) for i, n in enumerate(lengths)]


@pytest.fixture(scope="module")
def synth_clip(synth_data: Path) -> str:
    first = json.loads((synth_data / "vcast_synth.jsonl").read_text().splitlines()[0])
    return str(synth_data / first["video"])


def test_the_plugin_records_prefill_tflops(tiny_dirs: dict, synth_clip: str) -> None:
    pytest.importorskip("lmms_eval")
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    context = "How many times does it flash?\nA. 1\nB. 2\nC. 3\nD. 4"
    records = {}
    for method in ("vanilla", "vcast", "fastv"):
        plugin = VCastQwen3VL(pretrained=str(tiny_dirs["qwen3_vl"]), method=method,
                              ratio=1.0 if method == "vanilla" else 0.25, max_num_frames=16,
                              max_pixels=16384, min_pixels=4096)
        prepared = plugin._prepare([context], [[synth_clip]])
        inputs = prepared.tensors
        plugin._generate(prepared, {"max_new_tokens": 2}, ["t"], [0])
        record = records[method] = plugin.efficiency.records[-1]
        config = plugin.model.config
        layers = config.text_config.num_hidden_layers
        expected = call_prefill_flops(config, vision_units(config, inputs), plugin.handle.stats.layer_lengths(layers))
        assert record.vision_tflops == pytest.approx(expected.vision / 1e12) and record.vision_tflops > 0
        assert record.llm_tflops == pytest.approx(expected.llm / 1e12)
    shape = LLMShape.from_config(config)
    assert records["vanilla"].llm_tflops == pytest.approx(
        llm_prefill_flops(shape, records["vanilla"].prompt_tokens_before[0]) / 1e12)
    assert records["vcast"].llm_tflops == pytest.approx(
        llm_prefill_flops(shape, records["vcast"].prompt_tokens_after[0]) / 1e12)
    assert records["vcast"].vision_tflops == records["fastv"].vision_tflops == records["vanilla"].vision_tflops
    assert records["vcast"].llm_tflops < records["fastv"].llm_tflops < records["vanilla"].llm_tflops
    summary = summarize([asdict(records["vcast"])], wall_s=1.0)
    assert summary["prefill_tflops_per_item"] == pytest.approx(records["vcast"].vision_tflops
                                                               + records["vcast"].llm_tflops)


def test_a_text_only_batch_counts_each_rows_own_length(tiny_dirs: dict) -> None:
    """No videos: the stats hold no prompt lengths, so the plugin counts each row's unpadded length."""
    pytest.importorskip("lmms_eval")
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    plugin = VCastQwen3VL(pretrained=str(tiny_dirs["qwen3_vl"]), method="vcast", ratio=0.25, max_num_frames=16,
                          max_pixels=16384, min_pixels=4096)
    prepared = plugin._prepare(["Say hi", "A longer prompt without any video at all"], [[], []])
    inputs = prepared.tensors
    plugin._generate(prepared, {"max_new_tokens": 2}, ["t", "t"], [0, 1])
    record = plugin.efficiency.records[-1]
    lengths = inputs["attention_mask"].sum(1).tolist()
    assert record.prompt_tokens_before == [] and lengths[0] != lengths[1]
    shape = LLMShape.from_config(plugin.model.config)
    assert record.vision_tflops == 0.0
    assert record.llm_tflops == pytest.approx(sum(llm_prefill_flops(shape, int(n)) for n in lengths) / 1e12)


def _record(doc: int, **extra) -> dict:
    base = CallRecord(task="t", doc_ids=[doc, doc + 1], items=2, vision_s=0.0, selection_s=0.0, prefill_s=1.0,
                      decode_s=1.0, generate_s=2.0, decode_steps=1, output_tokens=2, peak_memory_mb=None,
                      memory_source="none", timer="perf_counter", video_tokens_total=10, video_tokens_kept=5)
    out = asdict(base)
    out.update(extra)
    return out


def test_summary_means_per_item_and_older_records_read_as_none() -> None:
    summary = summarize([_record(0, vision_tflops=2.0, llm_tflops=6.0), _record(2, vision_tflops=2.0, llm_tflops=2.0)],
                        wall_s=1.0)
    assert (summary["vision_tflops_per_item"], summary["llm_tflops_per_item"], summary["prefill_tflops_per_item"]) \
        == (1.0, 2.0, 3.0)
    old = _record(0)
    for key in ("vision_tflops", "llm_tflops"):
        old.pop(key)
    summary = summarize([old], wall_s=1.0)
    assert summary["prefill_tflops_per_item"] is None and summary["llm_tflops_per_item"] is None


def test_the_efficiency_table_shows_prefill_tflops_against_vanilla(tmp_path: Path) -> None:
    from vcast.report.collect import collect
    from vcast.report.export import csv_text, markdown_text
    from vcast.report.layouts import LAYOUTS
    from vcast.report.scoring import load_task_scorings
    from vcast.report.tables import build_table
    from tests.support.sample_logs import Answer, answers_spec, write_answers_cell

    scoring = load_task_scorings()["videomme"]
    for method, ratio, tflops in (("vanilla", 1.0, 67.3), ("vcast", 0.25, 28.3)):
        answers = [Answer("A" if i % 2 else "B", "A", d) for d in ("short", "medium", "long") for i in range(4)]
        write_answers_cell(tmp_path, answers_spec("efficiency", "qwen3vl_8b", 32, ratio, method, scoring), scoring,
                           {"videomme": answers}, {"prefill_latency_s": 10.0, "prefill_tflops_per_item": tflops})
    table = build_table(collect(tmp_path).frame, LAYOUTS["efficiency_comparison"], experiments=["efficiency"])
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(csv_text(table)))}
    assert float(rows["vcast"]["PrefillTFLOPs"]) == 28.3
    vcast = next(r for r in table.rows if r.method == "vcast")
    assert vcast.notes["PrefillTFLOPs"] == "↓57.9%"
    assert "| Prefill TFLOPs / item |" in markdown_text(table)
