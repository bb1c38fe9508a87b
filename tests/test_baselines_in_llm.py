"""Every in-LLM baseline inside the real tiny models, through ``attach`` + ``generate`` (SDPA).

- It runs, drops tokens between layers (fewer reach the last layer than entered the LLM), is
  deterministic, and reports its layer-averaged retention.
- Its pre-LLM step chooses exactly what that compressor chooses on the encoder's own tokens.
- Pure-pruning methods decode exactly like a naive cache-free recomputation of the same drops.
- Our attention rows choose what the eager kernel's full weights choose (``scores="eager"``).
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
from tests.llm_reference import capture_language_model_inputs, naive_logits, video_columns  # noqa: E402
from tests.model_inputs import batch, clip  # noqa: E402
from vcast.models.reference import encoder_selection  # noqa: E402
from vcast.registry import is_llm_method, method_params  # noqa: E402

IN_LLM = sorted(name for name in vcast.available_methods() if is_llm_method(name))
ARCHS = ("qwen3_vl", "llava_onevision")
PURE_PRUNING = ("fastv", "pdrop")  # no merged hidden states: a naive recomputation can replay them
RATIO = 0.25
STEPS = 3
# PDrop's default r is the layer-averaged share, which its first drop (before layer 1) alone keeps
# above 1/3 on these 2- and 3-layer models: its own ratio lambda is given instead.
PARAMS = {"pdrop": {"lam": 0.5}}
# FrameFusion's cost budget decides by itself whether the in-LLM steps drop anything (its pre-LLM
# merge may already use it all up) and may drop every video token (baselines/framefusion/).
OWN_SCHEDULE = ("framefusion",)
GREEDY = dict(max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, return_dict_in_generate=True,
              output_logits=True)


@pytest.fixture(scope="module")
def models(tiny_dirs: dict[str, Path]) -> dict[tuple[str, str], tuple[Any, Any]]:
    loaded = {}
    for arch in ARCHS:
        processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
        inputs = batch(arch, processor, ["What moves in this clip?"], [clip()])
        for kernel in ("sdpa", "eager"):
            model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch], attn_implementation=kernel).eval()
            loaded[(arch, kernel)] = (model, inputs)
    return loaded


def generate(model: Any, inputs: Any, method: str, **params: Any) -> tuple[torch.Tensor, torch.Tensor, Any]:
    params = {**PARAMS.get(method, {}), **params}
    with vcast.models.attach(model, method, RATIO, **params) as handle, torch.no_grad():
        out = model.generate(**inputs, **GREEDY)
        stats = handle.stats
    return out.sequences, torch.stack(out.logits).float(), stats


def test_the_in_llm_baselines_are_registered() -> None:
    assert set(IN_LLM) >= {"fastv", "pdrop", "sparsevlm", "flashvid", "prunevid", "framefusion", "holitom_llm"}


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", IN_LLM)
def test_in_llm_baseline_runs_drops_and_is_deterministic(method: str, arch: str, models: dict) -> None:
    model, inputs = models[(arch, "sdpa")]
    sequences, logits, stats = generate(model, inputs, method)
    (video,) = stats.segments
    assert stats.llm_stages, "no in-LLM stage ran"
    if method in OWN_SCHEDULE:
        assert stats.final_video_tokens <= video.kept and stats.layer_retention <= video.kept / video.total
    else:
        assert 0 < stats.final_video_tokens < video.kept <= video.total
        assert stats.layer_retention < video.kept / video.total
    assert stats.num_layers == len(model.model.language_model.layers)
    again_sequences, again_logits, again = generate(model, inputs, method)
    assert torch.equal(again_sequences, sequences) and torch.equal(again_logits, logits)
    assert [[c.tolist() for c in s.columns] for s in again.llm_stages] == [[c.tolist() for c in s.columns]
                                                                          for s in stats.llm_stages]

    plan = handle_plan(model, method)
    if plan.pre_method is not None:  # the pre-LLM step is exactly that compressor on the encoder's tokens
        expected = encoder_selection(model, inputs, plan.pre_method, plan.pre_ratio, **plan.pre_params)
        assert video.keep.tolist() == expected.keep.tolist()
    else:
        assert video.kept == video.total


def handle_plan(model: Any, method: str) -> Any:
    with vcast.models.attach(model, method, RATIO, **PARAMS.get(method, {})) as handle:
        return handle.plan


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", PURE_PRUNING)
def test_pure_pruning_baselines_equal_the_naive_recomputation(method: str, arch: str, models: dict) -> None:
    model, inputs = models[(arch, "sdpa")]
    captured = capture_language_model_inputs(model, inputs)
    sequences, logits, stats = generate(model, inputs, method)
    length = inputs["input_ids"].shape[1]
    plan = handle_plan(model, method)
    expected = naive_logits(model, captured, video_columns(model, inputs["input_ids"]),
                            [(s.layer, s.columns) for s in stats.llm_stages], sequences[:, length: length + STEPS - 1],
                            compact=plan.positions == "compact" and arch != "qwen3_vl")
    torch.testing.assert_close(logits, expected[:STEPS], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", [m for m in IN_LLM if "scores" in method_params(m)])
def test_attention_rows_choose_what_the_eager_weights_choose(method: str, arch: str, models: dict) -> None:
    """On the eager model: the stages keep the same tokens whether the scores are our recomputed
    rows or read from the kernel's full weights (the official way)."""
    model, inputs = models[(arch, "eager")]
    plan = handle_plan(model, method)
    if any(stage.queries is not None and stage.score_layer == stage.layer for stage in plan.stages):
        pytest.skip(f"{method} scores with the next layer's weights, which no kernel returns")
    chosen = {}
    for scores in ("rows", "eager"):
        _, _, stats = generate(model, inputs, method, scores=scores)
        chosen[scores] = [[c.tolist() for c in s.columns] for s in stats.llm_stages]
    assert chosen["rows"] == chosen["eager"] and chosen["rows"]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("variant", ["official", "vidcom2_qwen"])
def test_fastv_reproduction_variants_rows_choose_what_the_eager_weights_choose(variant: str, arch: str,
                                                                              models: dict) -> None:
    """FastV's reproduction variants (scores in the model's dtype; vidcom2_qwen: every query row,
    DeepStack before the layers, the post-drop mask by original positions) run inside the real
    model, prune, are deterministic, and choose the same tokens from our rows as from the eager
    kernel's weights."""
    model, inputs = models[(arch, "eager")]
    chosen = {}
    for scores in ("rows", "eager", "rows"):
        _, _, stats = generate(model, inputs, "fastv", scores=scores, variant=variant)
        (video,) = stats.segments
        assert 0 < stats.final_video_tokens < video.total
        columns = [[c.tolist() for c in s.columns] for s in stats.llm_stages]
        assert chosen.setdefault(scores, columns) == columns
    assert chosen["rows"] == chosen["eager"]
    sdpa_model, _ = models[(arch, "sdpa")]
    _, _, stats = generate(sdpa_model, inputs, "fastv", variant=variant)
    assert [[c.tolist() for c in s.columns] for s in stats.llm_stages] == chosen["rows"]
