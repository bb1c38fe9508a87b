"""PruneVid full (``prunevid``): the plan, the ratio split and stage B's choice on hand-built StageInputs."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
import torch

import vcast
from baselines.prunevid.defaults import default_selected_layer, split_ratio
from baselines.prunevid.official import official_stage_b_choose
from baselines.prunevid.paper import group_top_share, max_max_scores
from vcast.models.llm_plan import LLMInfo, StageInputs
from vcast.registry import get_method, is_llm_method, method_inputs

METHOD = "prunevid"


def plan_for(ratio: float, num_layers: int = 28, **params):
    llm = LLMInfo("test", num_layers)
    plan = get_method(METHOD)(ratio, llm, **params)
    plan.check(llm)
    return plan


def stage_inputs(frames: list[int], scores: torch.Tensor, videos: list[int] | None = None,
                 heads: int = 2, text_rows: int = 3, attention: torch.Tensor | None = None,
                 no_queries: bool = False) -> StageInputs:
    """A row ``[text, N video tokens, text_rows text tokens]`` whose attention [H, R, S] is 0
    except ``scores`` on the video columns, planted in head ``h = i % H`` and row ``i % R`` of video
    token ``i`` (so only a max over both heads and rows sees all of them)."""
    count = len(frames)
    width = 1 + count + text_rows
    visual = torch.arange(1, 1 + count)
    rows = torch.arange(1 + count, width)
    if attention is None:
        attention = torch.zeros(heads, text_rows, width)
        for i in range(count):
            attention[i % heads, i % text_rows, 1 + i] = scores[i]
    hidden = torch.randn(width, 4, generator=torch.Generator().manual_seed(0))
    return StageInputs(
        stage=0, layer=10, num_layers=28, hidden=hidden, visual=visual,
        frames=torch.tensor(frames), patches=torch.arange(count), videos=torch.tensor(videos or [0] * count),
        rows=rows[:0] if no_queries else rows, attention=None if no_queries else attention,
        entry_tokens=count, embeddings=hidden, entry_visual=visual, state={},
    )


def choose(ratio: float, inputs: StageInputs, **params) -> torch.Tensor:
    keep = plan_for(ratio, **params).stages[0].choose(inputs).keep
    return keep


# Registration and plans -----------------------------------------------------------------------
def test_registered_as_an_in_llm_method_without_model_inputs() -> None:
    assert METHOD in vcast.available_methods()
    assert is_llm_method(METHOD)
    assert method_inputs(METHOD) == ()


@pytest.mark.parametrize("num_layers,selected", [(28, 9), (32, 10), (36, 11), (2, 0), (3, 0)])
def test_plan_layers_and_pre_method(num_layers: int, selected: int) -> None:
    plan = plan_for(0.25, num_layers)
    assert default_selected_layer(num_layers) == selected
    (stage,) = plan.stages
    # The official S_sel is the layer whose attention is read; the layers after it see the kept tokens.
    assert (stage.layer, stage.score_layer) == (selected + 1, selected)
    assert (stage.queries, stage.rotary, stage.causal) == ("text", False, False)
    assert plan.positions == "original" and plan.scores == "rows"
    assert plan.pre_method == "prunevid_stage_a" and plan.pre_ratio == 0.5
    assert plan.pre_params == {"tau": 0.8, "temporal_segment_ratio": 0.25, "dpc_k": 7, "min_cluster_tokens": 14}


def test_plan_passes_stage_a_params_and_explicit_layer() -> None:
    plan = plan_for(0.2, 32, selected_layer=5, tau=0.7, temporal_segment_ratio=0.5, dpc_k=3, min_cluster_tokens=0)
    assert plan.stages[0].layer == 6 and plan.stages[0].score_layer == 5
    assert plan.pre_params == {"tau": 0.7, "temporal_segment_ratio": 0.5, "dpc_k": 3, "min_cluster_tokens": 0}
    assert plan_for(0.25, 2, selected_layer=0).stages[0].layer == 1


# The ratio split --------------------------------------------------------------------------------
def test_split_ratio() -> None:
    assert split_ratio(0.2, None, None) == (0.5, Fraction(2, 5))  # the official scripts
    assert split_ratio(0.25, None, None) == (0.5, Fraction(1, 2))
    # Above 0.25 both stages keep sqrt(r): 0.6 -> 0.7746 each (stage B still drops).
    gamma, alpha = split_ratio(0.6, None, None)
    assert gamma == pytest.approx(0.6 ** 0.5) and float(alpha) == pytest.approx(0.6 ** 0.5)
    assert Fraction(repr(gamma)) * alpha == Fraction(3, 5)
    assert split_ratio(1.0, None, None) == (1.0, Fraction(1))
    assert split_ratio(0.25, 0.4, None) == (0.625, Fraction(2, 5))
    assert split_ratio(0.2, None, 0.8) == (0.8, Fraction(1, 4))
    assert plan_for(0.25, alpha=0.4).pre_ratio == 0.625
    assert plan_for(0.2, cluster_ratio=0.8).pre_ratio == 0.8


def test_ratio_errors_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="alpha and cluster_ratio"):
        plan_for(0.2, alpha=0.4, cluster_ratio=0.5)
    with pytest.raises(ValueError, match="alpha"):
        plan_for(0.5, alpha=0.4)
    with pytest.raises(ValueError, match="cluster_ratio"):
        plan_for(0.5, cluster_ratio=0.4)
    with pytest.raises(ValueError, match="alpha"):
        plan_for(0.2, alpha=1.5)


@pytest.mark.parametrize("params,name", [
    ({"selected_layer": -1}, "selected_layer"), ({"selected_layer": 27}, "selected_layer"),
    ({"selected_layer": 2.0}, "selected_layer"), ({"tau": 1.5}, "tau"), ({"temporal_segment_ratio": 0}, "temporal_segment_ratio"),
    ({"temporal_segment_ratio": 1.5}, "temporal_segment_ratio"), ({"dpc_k": 0}, "dpc_k"),
    ({"min_cluster_tokens": -1}, "min_cluster_tokens"), ({"cluster_ratio": float("nan")}, "cluster_ratio"),
])
def test_bad_parameters_are_named(params: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        plan_for(0.25, **params)


# Stage B ----------------------------------------------------------------------------------------
def test_max_over_heads_then_rows_by_hand() -> None:
    # Token 0: one spike 0.9 (head 0, row 0), 0 elsewhere. Token 1: 0.5 in every head and row.
    attention = torch.zeros(2, 3, 6)
    attention[0, 0, 1] = 0.9
    attention[:, :, 2] = 0.5
    attention[1, 2, 3] = 0.4
    inputs = stage_inputs([0, 0, 0], torch.zeros(3), attention=attention)
    assert torch.equal(max_max_scores(inputs), torch.tensor([0.9, 0.5, 0.4]))
    # A mean over heads or rows would rank token 1 first (0.5 > 0.15); max-max keeps the spike.
    assert choose(0.2, inputs, alpha=0.4).tolist() == [0]  # floor(3 * 0.4) = 1 token


def test_planted_tokens_survive_per_frame_counts() -> None:
    frames = [0] * 5 + [1] * 3 + [2] * 4 + [3] * 1
    scores = torch.tensor([.1, .2, .9, .3, .8,  .7, .1, .2,  .1, .6, .5, .4,  .9])
    keep = choose(0.25, stage_inputs(frames, scores))  # alpha = 0.25 / 0.5
    # floor(n_f / 2) per frame: 2, 1, 2, 0 (the lone token of frame 3 goes, however high).
    assert keep.tolist() == [2, 4, 5, 9, 10]
    counts = torch.bincount(torch.tensor(frames)[keep], minlength=4).tolist()
    assert counts == [2, 1, 2, 0]


def test_ties_go_to_the_lower_index() -> None:
    keep = choose(0.25, stage_inputs([0] * 4 + [1] * 4, torch.tensor([.3, .3, .3, .3, .1, .5, .5, .5])))
    assert keep.tolist() == [0, 1, 5, 6]
    # Many ties (an unstable sort reorders them): the lowest indices of each frame.
    keep = choose(0.25, stage_inputs([0] * 3000 + [1] * 10, torch.zeros(3010)))
    assert keep.tolist() == list(range(1500)) + list(range(3000, 3005))


def test_frames_are_grouped_per_video() -> None:
    # Two videos, each with one frame 0 of 4 tokens: two groups of 4, not one of 8.
    scores = torch.tensor([.9, .8, .7, .6, .1, .2, .3, .4])
    keep = choose(0.25, stage_inputs([0] * 8, scores, videos=[0] * 4 + [1] * 4))
    assert keep.tolist() == [0, 1, 6, 7]


def test_counts_are_exact_floors_of_the_decimal_share() -> None:
    # alpha = 0.145 / 0.5 = 0.29; in float 100 * 0.29 = 28.999999999999996, exactly 29.
    scores = torch.linspace(0, 1, 100)
    keep = group_top_share(scores, torch.zeros(100, dtype=torch.long), split_ratio(0.145, None, None)[1])
    assert keep.tolist() == list(range(71, 100))
    assert choose(0.145, stage_inputs([0] * 100, scores)).numel() == 29


def test_no_query_after_the_video_keeps_everything() -> None:
    keep = choose(0.25, stage_inputs([0, 0, 1, 1], torch.rand(4), no_queries=True))
    assert keep.tolist() == [0, 1, 2, 3]


def test_alpha_one_keeps_everything() -> None:
    assert choose(1.0, stage_inputs([0, 0, 0, 1], torch.rand(4))).tolist() == [0, 1, 2, 3]
    assert choose(0.7, stage_inputs([0, 0, 0, 1], torch.rand(4)), alpha=1.0).tolist() == [0, 1, 2, 3]
    # sqrt(0.6) = 0.7746: floor(4 * 0.7746) = 3 of a 4-token frame.
    assert choose(0.6, stage_inputs([0] * 4, torch.tensor([.1, .4, .3, .2]))).tolist() == [1, 2, 3]


@pytest.mark.parametrize("t,p,r", [(8, 16, 0.25), (5, 49, 0.15), (12, 30, 0.35), (3, 7, 0.5), (16, 36, 0.2)])
def test_stage_b_on_stage_a_outputs_keeps_the_floor_per_frame(t: int, p: int, r: float) -> None:
    """Stage A (the registered compressor, as the plan runs it) then stage B on its outputs'
    (frame, patch) tags: the count is sum over frames of floor(n_f * alpha)."""
    plan = plan_for(r)
    frames = torch.randn(t, p, 16, generator=torch.Generator().manual_seed(t * p))
    frames[:, ::2] = frames[:1, ::2] + 0.05 * frames[:, ::2]  # even locations static
    sel = vcast.select(frames, plan.pre_ratio, method=plan.pre_method, **plan.pre_params)
    # Exactly floor(gamma T P), or fewer when static averaging alone leaves fewer (high gamma).
    assert sel.keep.numel() <= math.floor(Fraction(repr(plan.pre_ratio)) * t * p)
    tag_frames = (sel.keep // p).tolist()
    scores = torch.rand(sel.keep.numel(), generator=torch.Generator().manual_seed(1))
    keep = plan.stages[0].choose(stage_inputs(tag_frames, scores)).keep
    alpha = Fraction(repr(r)) / Fraction(repr(plan.pre_ratio))
    per_frame = [math.floor(n * alpha) for n in sel.budgets.tolist()]
    assert keep.numel() == sum(per_frame) <= math.floor(Fraction(repr(r)) * t * p)
    assert torch.bincount(torch.tensor(tag_frames)[keep], minlength=t).tolist() == per_frame
    assert torch.all(keep[1:] > keep[:-1])
    # Within each frame the kept tokens are the highest-scoring ones.
    for frame in range(t):
        members = (torch.tensor(tag_frames) == frame).nonzero().squeeze(1)
        kept = members[torch.isin(members, keep)]
        dropped = members[~torch.isin(members, keep)]
        if kept.numel() and dropped.numel():
            assert scores[kept].min() >= scores[dropped].max()


def test_pinned_counts_at_25_percent() -> None:
    """(T, P) = (8, 16): stage A keeps 64 of 128, stage B half of every frame (floored)."""
    plan = plan_for(0.25)
    frames = torch.randn(8, 16, 16, generator=torch.Generator().manual_seed(3))
    sel = vcast.select(frames, plan.pre_ratio, method=plan.pre_method, **plan.pre_params)
    keep = plan.stages[0].choose(stage_inputs((sel.keep // 16).tolist(), torch.rand(64))).keep
    assert sel.keep.numel() == 64
    assert keep.numel() == sum(n // 2 for n in sel.budgets.tolist())
    assert 32 - 8 <= keep.numel() <= 32  # at most one token lost per frame


# variant="official": Visual-AI/PruneVid@b12600c process_attention (our own known answers) ---------


def test_official_plan() -> None:
    plan = plan_for(0.2, variant="official", seed=4)
    assert vcast.method_variants(METHOD) == ("paper", "official")
    assert plan.pre_method == "prunevid_stage_a" and plan.pre_ratio == 0.5
    assert plan.pre_params["variant"] == "official" and plan.pre_params["seed"] == 4
    assert (plan.score_dtype, plan.score_scale, plan.positions) == ("model", "divide", "original")
    stage = plan.stages[0]
    assert (stage.rotary, stage.causal, stage.queries) == (False, False, "text")
    paper = plan_for(0.2)
    assert paper.score_dtype == "float32" and "variant" not in paper.pre_params
    with pytest.raises(ValueError, match="'vidcom2_qwen'"):
        plan_for(0.2, variant="vidcom2_qwen")


def with_slots(inputs: StageInputs, frames: list[int], patches: list[int]) -> StageInputs:
    return dataclasses.replace(inputs, frames=torch.tensor(frames), patches=torch.tensor(patches))


def test_official_static_and_dynamic_groups_of_a_first_frame_by_hand() -> None:
    """Frame 0 of a window (P = 20): static outputs at patches 0-4, dynamic ones at 10-19. alpha 0.4:
    int(5 * 0.4) = 2 static (the best two: 0, 1) and int(10 * 0.4) = 4 dynamic (scores 0.5 .. 0.2 at
    9, 10, 11, 12). The paper variant ranks the frame's 15 together: int(15 * 0.4) = 6, all static first."""
    scores = torch.tensor([0.99, 0.98, 0.97, 0.96, 0.95, 0.1, 0.1, 0.1, 0.1, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05])
    inputs = with_slots(stage_inputs([0] * 15, scores), [0] * 15, [0, 1, 2, 3, 4] + list(range(10, 20)))
    assert official_stage_b_choose(inputs, 0.4).keep.tolist() == [0, 1, 9, 10, 11, 12]
    assert choose(0.2, inputs, alpha=0.4).tolist() == [0, 1, 2, 3, 4, 9]


def test_official_counts_truncate_the_float_product() -> None:
    """One group of 100 tokens at alpha 0.29: int(100 * 0.29) = int(28.999999999999996) = 28
    (the paper variant's exact decimal share keeps 29)."""
    scores = torch.linspace(1.0, 0.01, 100)
    inputs = with_slots(stage_inputs([0] * 100, scores), [0] * 100, list(range(100)))
    assert official_stage_b_choose(inputs, 0.29).keep.tolist() == list(range(28))
    assert choose(0.29 * 0.5, inputs, cluster_ratio=0.5).numel() == 29


def test_official_without_queries_keeps_everything() -> None:
    inputs = stage_inputs([0, 0, 1], torch.rand(3), no_queries=True)
    assert official_stage_b_choose(inputs, 0.4).keep.tolist() == [0, 1, 2]
