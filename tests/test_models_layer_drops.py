"""In-LLM token dropping on the real tiny models (``vcast.models.layer_drops``).

- A stage that re-lays every token in place (merging each into itself) leaves ``generate``
  exactly as without hooks: DeepStack, masks, positions and the per-layer caches line up.
- A real drop (FastV, one or two stages, padded batches, sdpa and eager kernels, original and
  compacted positions) gives the logits of a naive cache-free recomputation
  (``tests/llm_reference.py``) at the prompt and at every decoding step.
- The attention rows computed next to SDPA choose what the eager attention's full weights choose.
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
from baselines.common.dpc_knn import top_indices  # noqa: E402
from tests.llm_reference import capture_language_model_inputs, naive_logits, video_columns  # noqa: E402
from tests.model_inputs import batch, clip  # noqa: E402
from vcast import registry  # noqa: E402
from vcast.models.llm_plan import LLMInfo, LLMPlan, LLMStage, StageChoice, StageInputs  # noqa: E402

ARCHS = ("qwen3_vl", "llava_onevision")
STEPS = 4
GREEDY = dict(max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, return_dict_in_generate=True,
              output_logits=True)


def load(tiny_dirs: dict[str, Path], arch: str, implementation: str = "sdpa") -> tuple[Any, Any]:
    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch], attn_implementation=implementation).eval()
    return model, AutoProcessor.from_pretrained(tiny_dirs[arch])


@pytest.fixture(scope="module")
def sdpa_models(tiny_dirs: dict[str, Path]) -> dict[str, tuple[Any, Any]]:
    return {arch: load(tiny_dirs, arch) for arch in ARCHS}


def two_clips(arch: str, processor: Any) -> Any:
    """A left-padded batch of two clips with questions of different lengths (Qwen3-VL: 8 and 4
    frames; LLaVA-OneVision's processor needs equal frame counts)."""
    second = 4 if arch == "qwen3_vl" else 8
    return batch(arch, processor, ["What moves?", "Is anything else happening in this short clip?"],
                 [clip(frames=8, seed=1), clip(frames=second, seed=2)])


def run(model: Any, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        out = model.generate(**inputs, **GREEDY)
    return out.sequences, torch.stack(out.logits).float()


def in_place_merge(inputs: StageInputs) -> StageChoice:
    """Keep every token and write its own hidden state back: a full re-layout that changes nothing."""
    keep = torch.arange(inputs.visual.numel())
    return StageChoice(keep=keep, tokens=inputs.hidden.index_select(0, inputs.visual))


def every_other(inputs: StageInputs) -> StageChoice:
    """A fixed, score-free rule: keep every second video token, or every third when the row's video
    starts at an odd column (so rows padded differently keep different counts: a ragged batch)."""
    step = 2 + int(inputs.entry_visual[0]) % 2
    return StageChoice(keep=torch.arange(0, inputs.visual.numel(), step))


@pytest.fixture
def test_planner(monkeypatch: pytest.MonkeyPatch):
    """Register ``planner`` under a test name for one test only."""
    vcast.available_methods()  # load the real ones first

    def install(name: str, planner: Any) -> str:
        monkeypatch.setitem(registry._REGISTRY, name, planner)
        monkeypatch.setitem(registry._INPUTS, name, ())
        monkeypatch.setattr(registry, "_IN_LLM", registry._IN_LLM | {name})
        return name

    return install


@pytest.mark.parametrize("arch", ARCHS)
def test_relaying_every_token_in_place_changes_nothing(arch: str, sdpa_models: dict, test_planner: Any) -> None:
    model, processor = sdpa_models[arch]
    layers = [1, 2] if arch == "qwen3_vl" else [1]

    def planner(ratio: float, llm: LLMInfo) -> LLMPlan:
        return LLMPlan(stages=tuple(LLMStage(layer=k, choose=in_place_merge) for k in layers))

    name = test_planner("in_place", planner)
    inputs = two_clips(arch, processor)
    sequences, logits = run(model, inputs)
    with vcast.models.attach(model, name, 1.0) as handle:
        hooked_sequences, hooked_logits = run(model, inputs)
        stats = handle.stats
    assert [stage.layer for stage in stats.llm_stages] == layers
    assert stats.llm_stages[-1].kept == [s.total for s in stats.segments]
    assert torch.equal(hooked_sequences, sequences)
    torch.testing.assert_close(hooked_logits, logits, rtol=1e-5, atol=1e-5)


def compare_with_reference(model: Any, inputs: Any, method: str, compact: bool = False, **params: Any) -> Any:
    captured = capture_language_model_inputs(model, inputs)
    length = inputs["input_ids"].shape[1]
    with vcast.models.attach(model, method, 0.25, **params) as handle:
        sequences, logits = run(model, inputs)
        stats = handle.stats
    assert stats.llm_stages, "no in-LLM stage ran"
    stages = [(stage.layer, stage.columns) for stage in stats.llm_stages]
    expected = naive_logits(model, captured, video_columns(model, inputs["input_ids"]), stages,
                            sequences[:, length: length + STEPS - 1], compact=compact)
    torch.testing.assert_close(logits, expected[:STEPS], rtol=1e-4, atol=1e-4)
    return stats


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_fastv_drop_equals_the_naive_recomputation(arch: str, implementation: str, tiny_dirs: dict,
                                                   sdpa_models: dict) -> None:
    model, processor = sdpa_models[arch] if implementation == "sdpa" else load(tiny_dirs, arch, implementation)
    for inputs in (batch(arch, processor, ["What moves?"], [clip()]), two_clips(arch, processor)):
        stats = compare_with_reference(model, inputs, "fastv", layer=1)
        (stage,) = stats.llm_stages
        assert stage.kept == [round(s.total * 0.25) for s in stats.segments]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("compact", [False, True])
def test_two_stages_equal_the_naive_recomputation(arch: str, compact: bool, tiny_dirs: dict,
                                                  test_planner: Any) -> None:
    """Two drops (Qwen3-VL: before layers 1 and 2, inside the DeepStack layers), a padded batch,
    eager masks; LLaVA also with compacted positions continuing each layer's own count."""
    model, processor = load(tiny_dirs, arch, "eager")
    layers = [1, 2] if arch == "qwen3_vl" else [1]

    def planner(ratio: float, llm: LLMInfo) -> LLMPlan:
        return LLMPlan(stages=tuple(LLMStage(layer=k, choose=every_other) for k in layers),
                       positions="compact" if compact else "original")

    name = test_planner("every_other", planner)
    stats = compare_with_reference(model, two_clips(arch, processor), name, compact=compact and arch != "qwen3_vl")
    first = stats.llm_stages[0]
    starts = [int(columns.min()) for columns in first.columns]  # the first video token is always kept
    steps = [2 + start % 2 for start in starts]
    assert first.kept == [-(-s.total // step) for s, step in zip(stats.segments, steps)]
    assert stats.layer_retention < 1.0


@pytest.mark.parametrize("arch", ARCHS)
def test_attention_rows_choose_what_the_eager_weights_choose(arch: str, tiny_dirs: dict, sdpa_models: dict) -> None:
    """FastV's choice from our rows (SDPA model), from the eager kernel's weights (scores='eager'),
    and from ``output_attentions`` of an untouched eager model: the same tokens."""
    sdpa_model, processor = sdpa_models[arch]
    eager_model, _ = load(tiny_dirs, arch, "eager")
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    chosen = []
    for model, scores in ((sdpa_model, "rows"), (eager_model, "eager"), (eager_model, "rows")):
        with vcast.models.attach(model, "fastv", 0.25, layer=1, scores=scores) as handle:
            run(model, inputs)
            chosen.append(handle.stats.llm_stages[0].columns[0].tolist())
    with torch.no_grad():
        out = eager_model(**inputs, output_attentions=True)
    attention = out.attentions[0][0].float().mean(0)[-1]  # layer 0 (= K - 1), head mean, last row
    video = video_columns(eager_model, inputs["input_ids"])[0].nonzero().squeeze(1)
    count = round(video.numel() * 0.25)
    expected = video[top_indices(attention[video], count)].tolist()
    assert chosen == [expected, expected, expected]


def test_an_eager_score_mode_needs_the_eager_kernel(sdpa_models: dict) -> None:
    model, _ = sdpa_models["qwen3_vl"]
    with pytest.raises(ValueError, match="attn_implementation='eager'"):
        vcast.models.attach(model, "fastv", 0.25, layer=1, scores="eager")


def test_in_llm_methods_refuse_bad_layers_and_select(sdpa_models: dict) -> None:
    model, _ = sdpa_models["llava_onevision"]  # 2 decoder layers: a drop can only come before layer 1
    with pytest.raises(ValueError, match="layer must be"):
        vcast.models.attach(model, "fastv", 0.25, layer=2)
    with pytest.raises(ValueError, match="use vcast.models.attach"):
        vcast.select(torch.randn(2, 4, 8), 0.25, method="fastv")


@pytest.mark.parametrize("arch", ARCHS)
def test_stages_see_each_videos_original_size(arch: str, sdpa_models: dict, test_planner: Any) -> None:
    """``StageInputs.video_sizes``: the T * P each video of the row had before any pruning (what
    FrameFusion's official budget counts from), per batch row."""
    model, processor = sdpa_models[arch]
    seen: list[dict[int, int]] = []

    def record(inputs: StageInputs) -> StageChoice:
        seen.append(dict(inputs.video_sizes))
        return StageChoice(keep=torch.arange(inputs.visual.numel()))

    name = test_planner("sizes", lambda ratio, llm: LLMPlan(stages=(LLMStage(layer=1, choose=record),)))
    with vcast.models.attach(model, name, 1.0) as handle:
        run(model, two_clips(arch, processor))
        segments = handle.stats.segments
    assert seen[:2] == [{0: segments[0].total}, {0: segments[1].total}]
    assert segments[0].total != segments[1].total or arch != "qwen3_vl"  # the two clips differ in length


def test_stats_read_after_detach_keep_the_layer_count(sdpa_models: dict) -> None:
    """``handle.stats`` is resolved lazily: read first after ``detach()`` (or after a ``with``
    block), an in-LLM method's layer-averaged retention is still over the model's layers."""
    model, processor = sdpa_models["qwen3_vl"]
    inputs = two_clips("qwen3_vl", processor)
    attached = vcast.models.attach(model, "fastv", 0.25, layer=1)
    model.generate(**inputs, max_new_tokens=2, do_sample=False)
    inside = attached.stats
    attached.detach()
    assert inside.num_layers == len(model.model.language_model.layers)
    handle = vcast.models.attach(model, "fastv", 0.25, layer=1)
    model.generate(**inputs, max_new_tokens=2, do_sample=False)
    handle.detach()
    after = handle.stats
    assert after.num_layers == inside.num_layers and after.layer_retention == pytest.approx(inside.layer_retention)
    assert after.layer_retention < 1.0
