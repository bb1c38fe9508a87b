"""In-LLM methods on a hybrid language model (Qwen3.5: three Gated DeltaNet layers per gated
softmax-attention layer): those whose stages read attention at softmax layers run, the others are
refused with the method, the layer, its type and the values that would work.

The model is the tiny random-weight Qwen3.5 with two groups of layers (8: softmax at 3 and 7), so
that a drop has linear layers after it: the 4-layer tiny checkpoint's only softmax layer is its last,
which leaves no drop that every method could place (all its in-LLM defaults are refused, checked in
``test_family_methods.py``).

- FastV before layer 4 (scores of layer 3, softmax) and PDrop before layer 7 (layer 7's own weights,
  its layer 6 linear) prune inside the LLM and equal a cache-free layer-by-layer recomputation of
  the same drop, every logit of a greedy continuation; FastV keeps the video tokens with the
  largest last-token attention of layer 3 as the *eager kernel* returns it (not our rows).
- A left-padded batch equals each sample alone (the rows keep different numbers of tokens, so the
  linear layers after the drop get the re-laid 2-D padding mask).
- SparseVLM, PruneVid (pre-RoPE, non-causal scores) and HoliTom's in-LLM merge (merged hidden
  states written back), with their stages on softmax layers, run, drop before layer 4 and are
  deterministic; FlashVID's plan with ``layer=4`` passes (its in-LLM stage is FastV's).
- Refusals: per parameter value and layer type, and the sweep's pre-flight says the same from the
  checkpoint's ``config.json`` before any job.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import vcast  # noqa: E402
from tests.model_inputs import batch, clip  # noqa: E402
from tests.llm_reference import language_model_inputs  # noqa: E402
from vcast.models.attached import attached_handle  # noqa: E402
from vcast.models.hybrid_methods import (  # noqa: E402
    LAYER_PARAMS,
    checkpoint_layer_types,
    config_layer_types,
    llm_method_refusal,
)
from vcast.registry import is_llm_method  # noqa: E402
from vcast.tiny_checkpoints import build  # noqa: E402

RATIO = 0.5
STEPS = 2
GREEDY = dict(max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, return_dict_in_generate=True,
              output_logits=True)
GROUP = ["linear_attention"] * 3 + ["full_attention"]
# Parameters that put each method's stages on the 8-layer model's softmax layers (3, 7).
APPLICABLE = {
    "fastv": {"layer": 4},
    "pdrop": {"layer_list": [7], "lam": 0.5},
    "sparsevlm": {"layers": [3], "fractions": [0.5]},
    "prunevid": {"selected_layer": 3},
    "holitom_llm": {"layer": 4},
    "flashvid": {"layer": 4, "llm_retention": 0.5, "min_segment_num": 2, "selection": "attn_div"},
}


@pytest.fixture(scope="module")
def deep() -> tuple[Any, Any]:
    """(the tiny Qwen3.5 with 8 layers, seed 0, float32 SDPA; its processor)."""
    model, processor = build("qwen3_5", "tiny", seed=0)
    config = copy.deepcopy(model.config)
    config.text_config.num_hidden_layers = 8
    config.text_config.layer_types = GROUP * 2
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        deeper = type(model)(config).eval()
    deeper.generation_config = model.generation_config
    return deeper, processor


@pytest.fixture(scope="module")
def one_clip(deep: tuple[Any, Any]) -> Any:
    return batch("qwen3_5", deep[1], ["What moves?"], [clip()])


def generate(model: Any, inputs: Any, method: str, steps: int = STEPS, **params: Any
             ) -> tuple[torch.Tensor, torch.Tensor, Any]:
    with vcast.models.attach(model, method, RATIO, **params) as handle, torch.no_grad():
        out = model.generate(**inputs, **dict(GREEDY, max_new_tokens=steps, min_new_tokens=steps))
        stats = handle.stats
    return out.sequences, torch.stack(out.logits), stats


def generate_capturing(model: Any, inputs: Any, method: str, **params: Any) -> tuple[Any, dict[str, Any]]:
    """:func:`generate`, and the language model's keyword inputs at its prefill as the model made them
    (this pre-hook is registered before the handle's, so it runs first; FastV and PDrop prune
    nothing before the LLM)."""
    with language_model_inputs(model) as captured:
        result = generate(model, inputs, method, **params)
    captured["video_columns"] = inputs["input_ids"][0] == model.config.video_token_id
    return result, captured


def call_layer(model: Any, index: int, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Decoder layer ``index`` on one row ``x [S, C]`` at MRoPE positions ``pos [3, S]``, no cache:
    a softmax layer with an explicit causal float mask, a linear layer with no mask."""
    language_model = model.model.language_model
    layer = language_model.layers[index]
    if model.config.text_config.layer_types[index] != "full_attention":
        return layer(x[None], attention_mask=None, position_embeddings=None, past_key_values=None, use_cache=False)[0]
    length = x.shape[0]
    causal = torch.full((length, length), torch.finfo(x.dtype).min).triu(1)[None, None]
    cos, sin = language_model.rotary_emb(x[None], pos[:, None, :])
    return layer(x[None], attention_mask=causal, position_embeddings=(cos, sin), position_ids=None,
                 past_key_values=None, use_cache=False)[0]


def prompt_positions(captured: dict[str, Any]) -> torch.Tensor:
    positions = captured["position_ids"]
    return positions[1:, 0] if positions.shape[0] == 4 else positions[:, 0]  # [3, S]: t, h, w


@torch.no_grad()
def recomputed_logits(model: Any, captured: dict[str, Any], drop: int, kept: torch.Tensor,
                      new_tokens: torch.Tensor) -> torch.Tensor:
    """float ``[n + 1, V]`` logits after the prompt and each of ``new_tokens [n]`` (one row, no pads),
    from scratch: the decoder layers called one by one without a cache, the prompt's video tokens
    not in ``kept`` (LLM input columns) sliced away before layer ``drop``, the softmax layers with
    an explicit causal float mask and their MRoPE positions, the linear layers with no mask."""
    language_model = model.model.language_model
    embeds, positions = captured["inputs_embeds"][0], prompt_positions(captured)
    steps = new_tokens.numel()
    x = torch.cat([embeds, language_model.embed_tokens(new_tokens)], 0)
    pos = torch.cat([positions, (positions.max() + 1 + torch.arange(steps)).expand(3, steps)], 1)
    is_video = torch.cat([captured["video_columns"], torch.zeros(steps, dtype=torch.bool)])
    origin = torch.arange(x.shape[0])
    for index in range(len(language_model.layers)):
        if index == drop:
            stay = ~is_video | torch.isin(origin, kept)
            x, pos, origin, is_video = x[stay], pos[:, stay], origin[stay], is_video[stay]
        x = call_layer(model, index, x, pos)
    return model.lm_head(language_model.norm(x[-(steps + 1):])).float()


@torch.no_grad()
def eager_weights(model: Any, captured: dict[str, Any], index: int) -> torch.Tensor:
    """``[H, S, S]``: the eager kernel's attention weights of softmax layer ``index`` on the whole
    prompt (layers 0 .. index called one by one)."""
    weights = {}

    def keep(module: Any, args: tuple, output: Any) -> None:
        weights["w"] = output[1]

    x, pos = captured["inputs_embeds"][0], prompt_positions(captured)
    hook = model.model.language_model.layers[index].self_attn.register_forward_hook(keep)
    model.set_attn_implementation("eager")
    try:
        for layer in range(index + 1):
            x = call_layer(model, layer, x, pos)
    finally:
        hook.remove()
        model.set_attn_implementation("sdpa")
    return weights["w"][0]


def test_the_model_has_linear_layers_after_each_softmax_layer(deep: tuple[Any, Any]) -> None:
    model, _ = deep
    assert config_layer_types(model.config) == tuple(GROUP * 2)
    softmax = [hasattr(layer, "self_attn") for layer in model.model.language_model.layers]
    assert softmax == [False, False, False, True] * 2


@pytest.mark.parametrize("method, params, drop", [("fastv", {"layer": 4}, 4),
                                                  ("pdrop", {"layer_list": [7], "lam": 0.5}, 7)],
                         ids=["fastv-K4", "pdrop-K7"])
def test_pure_pruning_equals_the_layer_by_layer_recomputation(method: str, params: dict, drop: int, deep: tuple,
                                                              one_clip: Any) -> None:
    model, _ = deep
    (sequences, logits, stats), captured = generate_capturing(model, one_clip, method, **params)
    (video,) = stats.segments
    (stage,) = stats.llm_stages
    assert stage.layer == drop and video.kept == video.total  # nothing before the LLM
    assert 0 < stage.kept[0] == stats.final_video_tokens < video.total
    length = one_clip["input_ids"].shape[1]
    expected = recomputed_logits(model, captured, drop, stage.columns[0], sequences[0, length: length + STEPS - 1])
    torch.testing.assert_close(logits[:, 0], expected, rtol=1e-4, atol=1e-4)
    # a different kept set gives different logits: the comparison sees the drop
    other = captured["video_columns"].nonzero().squeeze(1)[: stage.kept[0]]
    assert not torch.equal(torch.sort(other).values, stage.columns[0])
    wrong = recomputed_logits(model, captured, drop, other, sequences[0, length: length + STEPS - 1])
    assert (wrong - expected).abs().max() > 1e-3
    if method == "fastv":  # the known answer: the top last-token attention of layer 3 per the eager kernel
        scores = eager_weights(model, captured, 3)[:, -1].mean(0)  # [S] head mean of the last prompt token's row
        columns = captured["video_columns"].nonzero().squeeze(1)
        top = columns[scores[columns].topk(stage.kept[0]).indices]
        assert torch.sort(top).values.tolist() == stage.columns[0].tolist()


def test_left_padded_batch_matches_each_sample_alone(deep: tuple) -> None:
    model, processor = deep
    questions = ["What moves?", "Where does the bright square go, and how fast?"]
    videos = [clip(8, 128, seed=0), clip(4, 96, seed=1)]
    both = batch("qwen3_5", processor, questions, videos)
    assert (both["attention_mask"] == 0).any()
    sequences, logits, stats = generate(model, both, "fastv", layer=4)
    kept = stats.llm_stages[0].kept
    assert kept[0] != kept[1]  # re-laid with pads on the left after the drop
    for row, (question, video) in enumerate(zip(questions, videos)):
        alone = batch("qwen3_5", processor, [question], [video])
        single, single_logits, single_stats = generate(model, alone, "fastv", layer=4)
        assert single_stats.llm_stages[0].kept == [kept[row]]
        width = both["input_ids"].shape[1]
        assert sequences[row, width:].tolist() == single[0, alone["input_ids"].shape[1]:].tolist()
        torch.testing.assert_close(logits[:, row], single_logits[:, 0], rtol=1e-4, atol=1e-4)


# FastV and PDrop: above; FlashVID's in-LLM stage is FastV's (its pre-LLM merge is slow on CPU): its
# plan is checked below.
@pytest.mark.parametrize("method", sorted(set(APPLICABLE) - {"fastv", "pdrop", "flashvid"}))
def test_methods_with_stages_on_softmax_layers_run_and_are_deterministic(method: str, deep: tuple,
                                                                         one_clip: Any) -> None:
    """Prefill and one decoding step after the pre-LLM step and the drop (the drop's decoding is
    checked against the recomputation above)."""
    model, _ = deep
    params = APPLICABLE[method]
    assert llm_method_refusal("qwen3_5", method, params, ratio=RATIO, layer_types=GROUP * 2) is None
    sequences, logits, stats = generate(model, one_clip, method, 2, **params)
    (video,) = stats.segments
    assert stats.llm_stages and 0 < stats.final_video_tokens < video.kept
    assert [stage.layer for stage in stats.llm_stages] == [4]
    again_sequences, again_logits, again = generate(model, one_clip, method, 2, **params)
    assert torch.equal(again_sequences, sequences) and torch.equal(again_logits, logits)
    assert [[c.tolist() for c in s.columns] for s in again.llm_stages] == [[c.tolist() for c in s.columns]
                                                                          for s in stats.llm_stages]


@pytest.mark.parametrize("method, params, named", [
    ("fastv", {"layer": 2}, ["(layer=2)", "layer 1, a 'linear_attention' layer", "layer=4"]),
    ("fastv", {"layer": 6}, ["layer 5, a 'linear_attention' layer", "layer=4 (any of 4)"]),
    ("pdrop", {"layer_list": [3], "lam": 0.5}, ["layer 3, the first softmax-attention layer", "layer_list=[7]"]),
    ("pdrop", {"layer_list": [5], "lam": 0.5}, ["layer 5, a 'linear_attention' layer", "layer_list=[7]"]),
    ("sparsevlm", {"layers": [1, 5], "fractions": [0.5, 0.4]}, ["layer 1, a 'linear_attention'", "layers=[3]"]),
    ("prunevid", {"selected_layer": 2}, ["layer 2, a 'linear_attention' layer", "selected_layer=3"]),
    ("holitom_llm", {"layer": 3}, ["layer 2, a 'linear_attention' layer", "layer=4"]),
    ("framefusion", {}, ["layer 0, a 'linear_attention' layer", "no parameter of 'framefusion'"]),
])
def test_refusals_name_the_method_the_layer_and_what_works(method: str, params: dict, named: list, deep: tuple) -> None:
    model, _ = deep
    refusal = llm_method_refusal("qwen3_5", method, params, ratio=RATIO, layer_types=GROUP * 2)
    assert refusal is not None and refusal.startswith(f"method {method!r}")
    assert "Qwen3.5" in refusal and "no attention scores" in refusal
    for words in named:
        assert words in refusal, (words, refusal)
    with pytest.raises(ValueError) as error:
        vcast.models.attach(model, method, RATIO, **params)
    assert str(error.value) == refusal
    hooks = sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())
    assert attached_handle(model) is None and hooks == 0


def test_flashvid_with_its_stage_on_a_softmax_layer_applies() -> None:
    assert llm_method_refusal("qwen3_5", "flashvid", APPLICABLE["flashvid"], ratio=RATIO, layer_types=GROUP * 2) is None
    refusal = llm_method_refusal("qwen3_5", "flashvid", dict(APPLICABLE["flashvid"], layer=3), ratio=RATIO,
                                 layer_types=GROUP * 2)
    assert "layer 2, a 'linear_attention' layer" in refusal and "layer=4" in refusal
    # no official defaults for this family: the planner's own reason, in attach's words
    no_defaults = llm_method_refusal("qwen3_5", "flashvid", layer_types=GROUP * 2)
    assert no_defaults.startswith("invalid parameters for method 'flashvid': flashvid has no official defaults")


@pytest.mark.parametrize("config", ["qwen3_5_27b", "qwen3_5_35b_a3b"])
def test_the_suggested_values_work_on_the_published_models(config: str) -> None:
    """With the defaults every in-LLM method is refused on the released models; the value each
    refusal names runs (its plan passes), FrameFusion excepted (no layer parameter)."""
    from vcast.families import get_family

    family = get_family("qwen3_5")
    published = family.published_model(config)
    types = config_layer_types(family.load("real_size")(published.arch))
    assert checkpoint_layer_types(published.repo, family) == types and types.count("full_attention") * 4 == len(types)
    for method in (name for name in vcast.available_methods() if is_llm_method(name)):
        params = {} if method != "flashvid" else dict(APPLICABLE["flashvid"], layer=2)  # no defaults for Qwen3.5
        refusal = llm_method_refusal(family, method, params, layer_types=types)
        assert refusal is not None and f"method {method!r}" in refusal, method
        if method not in LAYER_PARAMS:
            assert "no parameter" in refusal
            continue
        name = LAYER_PARAMS[method][0]
        suggested = eval(refusal.split(f"nearest values that work: {name}=")[1].split(" (any of")[0])  # noqa: S307
        fixed = {**params, name: suggested}
        assert llm_method_refusal(family, method, fixed, layer_types=types) is None, (method, fixed)
        if config == "qwen3_5_27b":  # without layer types: judged on the published models, this one first
            assert llm_method_refusal(family, method, params) == refusal.replace(f"this {family.display} model",
                                                                                 published.display)


def test_the_sweep_preflight_reads_the_checkpoints_layers(deep: tuple, tmp_path: Path) -> None:
    from vcast.sweep.spec import CellSpec, preflight

    model, _ = deep
    model.config.save_pretrained(tmp_path)
    assert checkpoint_layer_types(str(tmp_path)) == tuple(GROUP * 2)

    def spec(method: str, params: dict, pretrained: str = str(tmp_path)) -> CellSpec:
        return CellSpec(experiment="t", model="m", plugin="vcast_qwen3_5", pretrained=pretrained, prompt_key="k",
                        model_args={}, method=method, method_id=method, method_params=params, ratio=RATIO, frames=8,
                        task="vcast_synth", lmms_tasks=["vcast_synth"])

    assert preflight(spec("fastv", {"layer": 4})) is None
    assert preflight(spec("fastv", {"layer": 2})) == llm_method_refusal("qwen3_5", "fastv", {"layer": 2}, ratio=RATIO,
                                                                       layer_types=GROUP * 2)
    assert "layer=4 (any of 4)" in preflight(spec("fastv", {"layer": 2}))
    # the published model by its Hub id (no download: its config is known): FastV's K=4 runs on 64 layers
    assert preflight(spec("fastv", {"layer": 4}, "Qwen/Qwen3.5-27B")) is None
    assert "layer=8" in preflight(spec("fastv", {"layer": 9}, "Qwen/Qwen3.5-27B"))
    assert "framefusion" in preflight(spec("framefusion", {}))
