"""PDrop (baselines/pdrop/): the plan per depth, lam solving the layer-averaged retention, the
stage counts int(N0 lam^i) carried through chained stages, planted attention kept, validation.

StageInputs are built by hand the way vcast.models.layer_drops hands them over: a row
[prefix text | video | question], the query row is the last prompt token, and after a stage the
sequence is compacted to the kept video tokens (which the next stage sees).
"""

from __future__ import annotations

import math

import pytest
import torch

import vcast
from baselines.pdrop.method import pdrop_plan
from baselines.pdrop.schedule import solve_lambda
from vcast import registry
from vcast.families import get_family
from vcast.models.llm_plan import LLMInfo, StageChoice, StageInputs

QWEN2 = LLMInfo.of(get_family("llava_onevision"), 28)
QWEN3 = LLMInfo.of(get_family("qwen3_vl"), 36)
PREFIX, QUESTION, DIM, HEADS = 3, 4, 6, 2


def rho(lam: float, layer_list: list[int], num_layers: int) -> float:
    """The layer-averaged retention (baselines/pdrop/): rho = sum_i (b_{i+1} - b_i) lam^i / L, b = [0, *layers, L]."""
    bounds = [0] + list(layer_list) + [num_layers]
    return sum((bounds[i + 1] - bounds[i]) * lam**i for i in range(len(bounds) - 1)) / num_layers


def stage_inputs(stage: int, layer: int, video_scores: torch.Tensor, entry_tokens: int, state: dict,
                 head_scores: torch.Tensor | None = None, seed: int = 0) -> StageInputs:
    """One row with ``N = video_scores.numel()`` video tokens whose last-token attention (every
    head) is ``video_scores``; ``head_scores`` [H, N] plants per-head values instead."""
    generator = torch.Generator().manual_seed(seed)
    count = video_scores.numel()
    width = PREFIX + count + QUESTION
    visual = torch.arange(PREFIX, PREFIX + count)
    attention = torch.full((HEADS, 1, width), 1e-3)
    attention[:, 0, visual] = video_scores if head_scores is None else head_scores
    entry_width = PREFIX + entry_tokens + QUESTION
    return StageInputs(
        stage=stage, layer=layer, num_layers=28, hidden=torch.randn(width, DIM, generator=generator), visual=visual,
        frames=torch.arange(count) // 4, patches=torch.arange(count) % 4, videos=torch.zeros(count, dtype=torch.long),
        rows=torch.tensor([width - 1]), attention=attention, entry_tokens=entry_tokens,
        embeddings=torch.randn(entry_width, DIM, generator=generator),
        entry_visual=torch.arange(PREFIX, PREFIX + entry_tokens), state=state,
    )


def run_stages(plan, entry_scores: torch.Tensor) -> list[torch.Tensor]:
    """Run every stage of ``plan`` on one row whose video tokens carry fixed ``entry_scores``
    (each token keeps its score through the stages); returns the kept entry indices per stage."""
    state: dict = {}
    present = torch.arange(entry_scores.numel())
    kept = []
    for index, stage in enumerate(plan.stages):
        choice = stage.choose(stage_inputs(index, stage.layer, entry_scores[present], entry_scores.numel(), state))
        assert isinstance(choice, StageChoice) and choice.tokens is None  # PDrop only prunes
        assert choice.keep.unique().numel() == choice.keep.numel()
        present = present[torch.sort(choice.keep).values]
        kept.append(present)
    return kept


def test_registered_with_its_parameters():
    assert "pdrop" in vcast.available_methods()
    assert registry.is_llm_method("pdrop")
    assert registry.method_inputs("pdrop") == ()
    assert vcast.method_params("pdrop") == {"layer_list": None, "lam": None, "ratio_list": None, "variant": "paper"}
    assert registry.method_variants("pdrop") == ("paper", "official")


@pytest.mark.parametrize("llm, layers", [(QWEN2, [2, 8, 16]), (QWEN3, [3, 10, 21]), (LLMInfo("LLaMA", 32), [2, 9, 18])])
def test_plan_per_depth(llm, layers):
    plan = pdrop_plan(0.25, llm)
    plan.check(llm)
    assert [s.layer for s in plan.stages] == layers
    assert [s.score_layer for s in plan.stages] == layers  # the NEXT layer's weights on its input
    assert all(s.queries == "last" and s.rotary and s.causal for s in plan.stages)
    assert plan.positions == "compact" and plan.pre_method is None and plan.scores == "rows"


@pytest.mark.parametrize("num_layers, layers, ratio, lam", [(2, [1], 0.6, 0.2), (3, [1, 2], 7 / 12, 0.5)])
def test_tiny_depths_scale_to_one_or_two_stages(num_layers, layers, ratio, lam):
    # 2 layers: rho = (1 + lam) / 2; 3 layers: rho = (1 + lam + lam^2) / 3 = 7/12 at lam = 0.5.
    for family in ("llava_onevision", "qwen3_vl"):
        llm = LLMInfo.of(get_family(family), num_layers)
        plan = pdrop_plan(ratio, llm)
        plan.check(llm)
        assert [s.layer for s in plan.stages] == layers
        assert [s.score_layer for s in plan.stages] == layers
        kept = run_stages(plan, torch.rand(100, generator=torch.Generator().manual_seed(1)))
        assert [k.numel() for k in kept] == [math.floor(100 * lam ** (i + 1) + 1e-9) for i in range(len(layers))]
        with pytest.raises(ValueError, match=rf"0\.25.*\[1(, 2)?\].*{num_layers} layers"):
            pdrop_plan(0.25, llm)
        plan = pdrop_plan(0.25, llm, lam=0.5)  # an explicit lam works at any depth
        plan.check(llm)


@pytest.mark.parametrize("layers, num_layers, ratio", [
    ([2, 8, 16], 28, 0.25), ([2, 10, 18], 28, 0.25), ([3, 10, 21], 36, 0.25), ([8, 16, 24], 32, 0.3),
    ([2, 8, 16], 28, 0.1), ([5], 10, 0.9),
])
def test_lambda_solves_the_layer_averaged_retention(layers, num_layers, ratio):
    lam = solve_lambda(ratio, layers, num_layers)
    assert 0 < lam <= 1
    assert rho(lam, layers, num_layers) == pytest.approx(ratio, abs=1e-12)


def test_lambda_known_values():
    # the release's scripts' [8, 16, 24] / 32 with lam = 0.5 gives 46.875%;
    # on 28 layers [2, 8, 16] needs 0.429 and [2, 10, 18] 0.394 for 25%.
    assert solve_lambda(0.46875, [8, 16, 24], 32) == pytest.approx(0.5, abs=1e-12)
    assert solve_lambda(0.25, [2, 8, 16], 28) == pytest.approx(0.429, abs=5e-4)
    assert solve_lambda(0.25, [2, 10, 18], 28) == pytest.approx(0.394, abs=5e-4)
    assert solve_lambda(1.0, [2, 8, 16], 28) == 1.0
    # one stage: rho = (l + (L - l) lam) / L, linear
    assert solve_lambda(0.4, [4], 20) == pytest.approx((0.4 * 20 - 4) / 16, abs=1e-12)


def test_unreachable_ratio_names_the_values():
    with pytest.raises(ValueError, match=r"0\.25.*\[8, 16, 24\].*28 layers.*8/28"):
        pdrop_plan(0.25, QWEN2, layer_list=[8, 16, 24])
    with pytest.raises(ValueError, match="layer_list"):
        solve_lambda(8 / 28, [8, 16, 24], 28)  # exactly the floor: lam would be 0
    assert solve_lambda(8 / 28 + 1e-3, [8, 16, 24], 28) > 0


def test_counts_are_floors_of_the_entry_count():
    # lam = 0.5 on N0 = 576: 288, 144, 72 (the official 50/25/12.5%), each a share of the ENTRY count.
    kept = run_stages(pdrop_plan(0.5, QWEN2, layer_list=[8, 16, 24], lam=0.5),
                      torch.rand(576, generator=torch.Generator().manual_seed(2)))
    assert [k.numel() for k in kept] == [288, 144, 72]
    # A lam solved by bisection (0.4999999999999999 here) gives the same counts as the exact one.
    plan = pdrop_plan(0.46875, LLMInfo("LLaMA", 32), layer_list=[8, 16, 24])
    assert [k.numel() for k in run_stages(plan, torch.rand(576))] == [288, 144, 72]
    # The default at r = 0.25 on 28 layers, N0 = 1000: int(1000 lam^i) with the solved lam.
    lam = solve_lambda(0.25, [2, 8, 16], 28)
    kept = run_stages(pdrop_plan(0.25, QWEN2), torch.rand(1000, generator=torch.Generator().manual_seed(3)))
    assert [k.numel() for k in kept] == [math.floor(1000 * lam**i) for i in (1, 2, 3)] == [429, 184, 79]
    # Odd entry counts floor: N0 = 7, lam = 0.5 -> 3, 1, 1 (at least one stays; officially 0).
    kept = run_stages(pdrop_plan(0.5, QWEN2, layer_list=[8, 16, 24], lam=0.5), torch.rand(7))
    assert [k.numel() for k in kept] == [3, 1, 1]


def test_planted_high_attention_tokens_survive_every_stage():
    generator = torch.Generator().manual_seed(4)
    scores = torch.rand(200, generator=generator) * 0.01
    planted = torch.tensor([7, 55, 120, 199])
    scores[planted] = torch.tensor([0.9, 0.5, 0.7, 0.6])
    kept = run_stages(pdrop_plan(0.25, QWEN2), scores)
    assert [k.numel() for k in kept] == [85, 36, 15]
    for stage in kept:  # each stage keeps the globally top tokens, in column order
        assert torch.equal(stage, torch.sort(torch.sort(scores, descending=True, stable=True).indices[: stage.numel()]).values)
        assert set(planted.tolist()) <= set(stage.tolist())


def test_scores_are_the_head_mean_and_ties_go_to_the_lower_index():
    # token 3 is high in one head only (mean 0.4), token 5 moderately in both (mean 0.5): with one
    # token kept (int(8 * 0.125) = 1) the head mean keeps 5 (a head max would keep 3).
    heads = torch.zeros(HEADS, 8)
    heads[0, 3] = 0.8
    heads[:, 5] = 0.5
    one = pdrop_plan(0.5, QWEN2, layer_list=[8], lam=0.125).stages[0]
    assert one.choose(stage_inputs(0, 8, torch.zeros(8), 8, {}, head_scores=heads)).keep.tolist() == [5]
    # all equal: the lowest indices stay (int(8 * 0.25) = 2)
    two = pdrop_plan(0.5, QWEN2, layer_list=[8], lam=0.25).stages[0]
    assert sorted(two.choose(stage_inputs(0, 8, torch.full((8,), 0.2), 8, {})).keep.tolist()) == [0, 1]


def test_bad_parameters_name_themselves():
    for bad in ([8, 8, 16], [0, 8], [2, 28], [16, 8], "2,8", [], [2.0, 8]):
        with pytest.raises(ValueError, match="layer_list"):
            pdrop_plan(0.5, QWEN2, layer_list=bad)
    for bad in (1.5, 0, -0.1, True, "0.5", float("nan")):
        with pytest.raises(ValueError, match="lam"):
            pdrop_plan(0.5, QWEN2, lam=bad)


# variant="official" (Cooperx521/PyramidDrop@6444f30 pdrop_rank_drop) -------------------------------
def test_official_counts_truncate_without_a_minimum():
    official = pdrop_plan(0.5, QWEN2, layer_list=[8, 16, 24], lam=0.5, variant="official")
    # N0 = 7: int(3.5), int(1.75), int(0.875) = 3, 1, 0 (the release keeps none; paper keeps 3, 1, 1)
    assert [k.numel() for k in run_stages(official, torch.rand(7))] == [3, 1, 0]
    assert [k.numel() for k in run_stages(official, torch.rand(576))] == [288, 144, 72]
    # a lam a hair below 0.5 floors without paper's tolerance: int(576 * 0.4999999999999999) = 287
    just_below = pdrop_plan(0.5, QWEN2, layer_list=[8, 16, 24], lam=0.4999999999999999, variant="official")
    assert [k.numel() for k in run_stages(just_below, torch.rand(576))] == [287, 143, 71]
    paper = pdrop_plan(0.5, QWEN2, layer_list=[8, 16, 24], lam=0.4999999999999999)
    assert [k.numel() for k in run_stages(paper, torch.rand(576))] == [288, 144, 72]
    # the scripts' literal ratio list: shares of the ENTRY count
    listed = pdrop_plan(0.5, QWEN2, layer_list=[8, 16, 24], ratio_list=[0.6, 0.3, 0.1], variant="official")
    assert [k.numel() for k in run_stages(listed, torch.rand(50))] == [30, 15, 5]


def test_official_plan_scores_in_the_model_dtype_divided_by_sqrt_d():
    plan = pdrop_plan(0.25, QWEN2, variant="official")
    plan.check(QWEN2)
    assert [s.layer for s in plan.stages] == [2, 8, 16] == [s.score_layer for s in plan.stages]
    assert (plan.score_dtype, plan.score_scale, plan.positions) == ("model", "divide", "compact")
    paper = pdrop_plan(0.25, QWEN2)
    assert (paper.score_dtype, paper.score_scale) == ("float32", "multiply")


def test_official_head_mean_in_bf16_changes_a_choice():
    # 4 heads (the bf16 example of tests/test_baseline_fastv.py): float32 means 0.5019 (token 0) >
    # 0.501845 (token 1); bf16 probabilities give 0.5 < 0.50390625. int(2 * 0.5) = 1 token stays.
    heads = torch.tensor([[0.5019, 0.50196]] * 3 + [[0.5019, 0.5015]])
    official = pdrop_plan(0.5, QWEN2, layer_list=[8], lam=0.5, variant="official").stages[0]
    paper = pdrop_plan(0.5, QWEN2, layer_list=[8], lam=0.5).stages[0]

    def run(stage, dtype):
        row = stage_inputs(0, 8, torch.zeros(2), 2, {})
        attention = torch.full((4, 1, row.attention.shape[-1]), 1e-3)
        attention[:, 0, row.visual] = heads
        row = StageInputs(**{**row.__dict__, "attention": attention.to(dtype)})
        return stage.choose(row).keep.tolist()

    assert run(official, torch.float32) == [0]
    assert run(official, torch.bfloat16) == [1]
    assert run(paper, torch.float32) == [0]


def test_official_parameters():
    with pytest.raises(ValueError, match="ratio_list"):
        pdrop_plan(0.5, QWEN2, layer_list=[8, 16], ratio_list=[0.5, 0.25])  # paper has no ratio_list
    with pytest.raises(ValueError, match="not both"):
        pdrop_plan(0.5, QWEN2, layer_list=[8, 16], lam=0.5, ratio_list=[0.5, 0.25], variant="official")
    with pytest.raises(ValueError, match="one share per stage"):
        pdrop_plan(0.5, QWEN2, layer_list=[8, 16], ratio_list=[0.5], variant="official")
    with pytest.raises(ValueError, match="'bogus'"):
        pdrop_plan(0.5, QWEN2, variant="bogus")
    with pytest.raises(ValueError, match="vidcom2_qwen"):
        pdrop_plan(0.5, QWEN2, variant="vidcom2_qwen")
