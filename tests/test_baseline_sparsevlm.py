"""SparseVLM v1.5 (baselines/sparsevlm/): the plan per depth, the per-stage counts with recycling
carried through chained stages, the raters (hand-computed from tiny embeddings, kept in the state),
the rater-mean score, the recycled cluster means (hand-computed), edge cases, validation.

StageInputs are built by hand the way vcast.models.layer_drops hands them over: a row
[prefix text | video | text], the query rows are the text after the video, ``hidden`` is the
output of the layer just run, and after a stage the sequence is compacted to the kept video tokens
(merged ones written at their slot), which the next stage sees.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import vcast
from baselines.sparsevlm.method import sparsevlm_plan
from baselines.sparsevlm.official import official_cluster_and_merge, official_raters
from baselines.sparsevlm.paper import STATE_RATERS
from vcast import registry
from vcast.families import get_family
from vcast.models.llm_plan import LLMInfo, StageChoice, StageInputs

QWEN2 = LLMInfo.of(get_family("llava_onevision"), 28)
QWEN3 = LLMInfo.of(get_family("qwen3_vl"), 36)
TINY = LLMInfo.of(get_family("llava_onevision"), 2)
PREFIX, HEADS = 3, 2


def stage_inputs(stage: int, video_hidden: torch.Tensor, video_attention: torch.Tensor | None, entry_tokens: int,
                 embeddings: torch.Tensor, state: dict, layer: int = 1) -> StageInputs:
    """One row [PREFIX | N video | T text]; ``video_attention`` [H, T, N] is what the text rows pay
    the video tokens (None: no text rows); ``embeddings`` [PREFIX + N0 + T0, C] the layer-0 row."""
    count, dim = video_hidden.shape
    text = 0 if video_attention is None else video_attention.shape[1]
    width = PREFIX + count + text
    generator = torch.Generator().manual_seed(stage)
    hidden = torch.cat([torch.randn(PREFIX, dim, generator=generator), video_hidden,
                        torch.randn(text, dim, generator=generator).to(video_hidden.dtype)]).to(video_hidden.dtype)
    visual = torch.arange(PREFIX, PREFIX + count)
    attention = None
    if video_attention is not None:
        attention = torch.full((HEADS, text, width), 1e-3)
        attention[:, :, visual] = video_attention
    return StageInputs(
        stage=stage, layer=layer, num_layers=28, hidden=hidden, visual=visual, frames=torch.arange(count) // 8,
        patches=torch.arange(count) % 8, videos=torch.zeros(count, dtype=torch.long),
        rows=torch.arange(PREFIX + count, width), attention=attention, entry_tokens=entry_tokens,
        embeddings=embeddings, entry_visual=torch.arange(PREFIX, PREFIX + entry_tokens), state=state,
    )


def apply(choice: StageChoice, inputs: StageInputs, present: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What the engine does: the kept video tokens in column order, merged ones written in place.
    Returns (their hidden states [K, C], their entry indices [K])."""
    assert choice.keep.unique().numel() == choice.keep.numel()
    video = inputs.hidden.index_select(0, inputs.visual).clone()
    if choice.tokens is not None:
        assert choice.tokens.shape == (choice.keep.numel(), video.shape[1])
        video[choice.keep] = choice.tokens.to(video.dtype)
    order = torch.sort(choice.keep).values
    return video[order], present[order]


def expected_counts(entry: int, shares: list[float], scale: float) -> list[int]:
    """The official rule, written out: k = min(int(share * scale * N0), v - 1); m = int(0.3 (v - k)) + 1
    pruned tokens recycled into int(m / 10) + 1 clusters; v <- k + clusters."""
    present, counts = entry, []
    for share in shares:
        kept = min(max(1, math.floor(share * scale * entry + 1e-9)), present - 1)
        recycled = int(0.3 * (present - kept)) + 1
        present = kept + int(recycled / 10) + 1
        counts.append(present)
    return counts


def run_stages(plan, entry_scores: torch.Tensor, dim: int = 4, text: int = 5) -> list[int]:
    """Every stage of ``plan`` on one row; every text row pays each video token its entry score."""
    entry = entry_scores.numel()
    generator = torch.Generator().manual_seed(7)
    embeddings = torch.randn(PREFIX + entry + text, dim, generator=generator)
    video = torch.randn(entry, dim, generator=generator)
    present = torch.arange(entry)
    state: dict = {}
    counts = []
    for index, stage in enumerate(plan.stages):
        attention = entry_scores[present].expand(HEADS, text, -1).clone()
        inputs = stage_inputs(index, video, attention, entry, embeddings, state, layer=stage.layer)
        video, present = apply(stage.choose(inputs), inputs, present)
        counts.append(present.numel())
    assert STATE_RATERS in state
    return counts


def test_registered_with_its_parameters():
    assert "sparsevlm" in vcast.available_methods()
    assert registry.is_llm_method("sparsevlm")
    assert registry.method_inputs("sparsevlm") == ()
    assert vcast.method_params("sparsevlm") == {"layers": None, "fractions": None, "counts": None, "recycling": True,
                                                "scores": "rows", "variant": "paper", "seed": 0}
    assert registry.method_variants("sparsevlm") == ("paper", "official")


@pytest.mark.parametrize("llm, layers", [
    (QWEN2, [3, 6, 14]), (QWEN3, [4, 8, 18]), (LLMInfo("LLaMA", 32), [3, 7, 16]),  # 32: the official [2, 6, 15]
    (LLMInfo.of(get_family("llava_onevision"), 2), [1]), (LLMInfo.of(get_family("qwen3_vl"), 2), [1]), (LLMInfo.of(get_family("qwen3_vl"), 3), [1, 2]),
    (LLMInfo.of(get_family("llava_onevision"), 3), [1, 2]),
])
def test_plan_per_depth(llm, layers):
    plan = sparsevlm_plan(0.25, llm)
    plan.check(llm)
    assert [s.layer for s in plan.stages] == layers
    assert [s.score_layer for s in plan.stages] == [k - 1 for k in layers]  # the layer just run
    assert all(s.queries == "text" and s.rotary and s.causal for s in plan.stages)
    assert plan.positions == "compact" and plan.pre_method is None and plan.scores == "rows"
    eager = sparsevlm_plan(0.25, llm, scores="eager")
    eager.check(llm)
    assert eager.scores == "eager"


def test_explicit_layers_are_sparsevlm_layers():
    # the official v1.5 layers [2, 6, 15] of 32: pruned after those layers run, i.e. our stages [3, 7, 16]
    llm = LLMInfo("LLaMA", 32)
    plan = sparsevlm_plan(0.25, llm, layers=[2, 6, 15], fractions=[303 / 576, 110 / 576, 36 / 576])
    plan.check(llm)
    assert [s.layer for s in plan.stages] == [3, 7, 16]
    assert [s.score_layer for s in plan.stages] == [2, 6, 15]
    assert run_stages(plan, torch.rand(576)) == [312, 117, 39]
    tiny = sparsevlm_plan(0.25, TINY, layers=[0], fractions=[0.5])
    tiny.check(TINY)
    assert [s.layer for s in tiny.stages] == [1]


def test_counts_per_stage_on_576_tokens_are_the_official_ones():
    # "128" list [303, 110, 36]: 303 + 9 = 312, 110 + 7 = 117, 36 + 3 = 39 (Gumpest/SparseVLMs@26a5f48 score.py).
    scores = torch.rand(576, generator=torch.Generator().manual_seed(0))
    assert run_stages(sparsevlm_plan(0.25, QWEN2), scores) == [312, 117, 39]
    assert expected_counts(576, [303 / 576, 110 / 576, 36 / 576], 1.0) == [312, 117, 39]


@pytest.mark.parametrize("ratio, entry", [(0.125, 576), (0.4, 1000), (1.0, 576), (0.25, 6272), (0.1, 30)])
def test_counts_scale_with_the_ratio(ratio, entry):
    scores = torch.rand(entry, generator=torch.Generator().manual_seed(1))
    expected = expected_counts(entry, [303 / 576, 110 / 576, 36 / 576], ratio / 0.25)
    assert run_stages(sparsevlm_plan(ratio, QWEN2), scores) == expected
    if ratio == 0.125:
        assert expected == [164, 59, 20]  # 151 + 13, 55 + 4, 18 + 2
    if ratio == 1.0:
        assert expected[0] == 576  # 1212 capped at v - 1 = 575: the one pruned token comes back


def test_tiny_depth_keeps_the_last_share_in_one_stage():
    scores = torch.rand(72, generator=torch.Generator().manual_seed(2))
    # 2 layers: one stage with 36/576 of 72 -> 4 kept + 3 clusters of int(0.3 * 68) + 1 = 21 recycled.
    assert run_stages(sparsevlm_plan(0.25, TINY), scores) == [7]
    three = sparsevlm_plan(0.25, LLMInfo.of(get_family("qwen3_vl"), 3))
    assert run_stages(three, scores[:64]) == expected_counts(64, [110 / 576, 36 / 576], 1.0) == [14, 5]


def test_raters_from_layer0_embeddings_hand_computed():
    # video embeddings alternate [1, 0] and [0, 1]; text tokens [2, 0], [0, 0], [0, 0], [0, 2].
    # softmax over the text of [2, 0, 0, 0] and [0, 0, 0, 2], averaged: r = [a, b, b, a] with
    # a = (e^2 / (e^2 + 3) + 1 / (e^2 + 3)) / 2 = 0.404 > mean 0.25 > b = 0.096: raters {0, 3}.
    e2 = math.exp(2.0)
    a, b = (e2 + 1) / (e2 + 3) / 2, 1 / (e2 + 3)
    assert a > 0.25 > b
    video = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).repeat(4, 1)  # N0 = 8
    text = torch.tensor([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    prefix = torch.full((PREFIX, 2), 30.0)  # before the video: never text
    embeddings = torch.cat([prefix, video, text])
    # The raters (rows 0, 3) and the others (rows 1, 2) disagree. Per token: rater-mean of head means.
    attention = torch.zeros(HEADS, 4, 8)
    attention[0, 0, 2], attention[1, 0, 2] = 0.9, 0.1  # token 2: row 0 -> 0.5, row 3 -> 0: 0.25
    attention[:, 0, 6], attention[:, 3, 6] = 0.3, 0.3  # token 6: 0.3
    attention[:, 3, 4] = 0.55  # token 4: row 3 only -> 0.275 (a max over raters would put it first)
    attention[:, 1:3, 1] = 1.0  # token 1: the non-raters only -> 0
    hidden = torch.randn(8, 2, generator=torch.Generator().manual_seed(3))
    for kept, expected in ((1, [6]), (2, [4, 6]), (3, [2, 4, 6])):
        plan = sparsevlm_plan(0.25, TINY, layers=[0], fractions=[kept / 8], recycling=False)
        state: dict = {}
        choice = plan.stages[0].choose(stage_inputs(0, hidden, attention, 8, embeddings, state))
        assert sorted(choice.keep.tolist()) == expected and choice.tokens is None
        assert state[STATE_RATERS].tolist() == [0, 3]


def test_raters_are_chosen_once_and_kept_in_the_state():
    video = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).repeat(4, 1)
    first = torch.cat([torch.zeros(PREFIX, 2), video, torch.tensor([[2.0, 0], [0, 0], [0, 0], [0, 2.0]])])
    other = torch.cat([torch.zeros(PREFIX, 2), video, torch.tensor([[0.0, 0], [2.0, 0], [0, 2.0], [0, 0]])])
    plan = sparsevlm_plan(0.25, LLMInfo.of(get_family("llava_onevision"), 4), layers=[0, 1], fractions=[6 / 8, 1 / 8],
                          recycling=False)
    hidden = torch.randn(8, 2, generator=torch.Generator().manual_seed(4))
    state: dict = {}
    attention = torch.zeros(HEADS, 4, 8)
    attention[:, [0, 3], :6] = torch.linspace(1.0, 0.5, 6)  # raters like tokens 0..5
    choice = plan.stages[0].choose(stage_inputs(0, hidden, attention, 8, first, state))
    assert sorted(choice.keep.tolist()) == [0, 1, 2, 3, 4, 5]
    # Stage 1: other embeddings would pick rows {1, 2}; the state's {0, 3} are used. An extra
    # leading query row (a between-video token exposed) shifts nothing: the text is the LAST 4 rows.
    attention = torch.zeros(HEADS, 5, 6)
    attention[:, [1, 4], 4] = 0.8  # the raters (last 4 rows: 1 + {0, 3})
    attention[:, [2, 3], 1] = 0.9  # rows {1, 2} of the text
    attention[:, 0, 2] = 1.0  # the extra row, and rows {0, 3} unshifted, i.e. rows 0 and 3
    attention[:, 3, 2] = 1.0
    choice = plan.stages[1].choose(stage_inputs(1, hidden[:6], attention, 8, other, state))
    assert choice.keep.tolist() == [4]
    assert state[STATE_RATERS].tolist() == [0, 3]


def recycling_case(dtype: torch.dtype = torch.float32):
    """N0 = 40: tokens 0..9 score highest (kept: int(0.25 * 40) = 10), 20..29 next (the top
    m = int(0.3 * 30) + 1 = 10 pruned ones, recycled into int(10 / 10) + 1 = 2 clusters), the rest
    low. Features of 20..24 form group A around [0, 0] (its densest token is 21, not the first),
    25..29 group B around [10, 10]."""
    scores = torch.full((40,), 0.01)
    scores[:10] = 1.0 - 0.01 * torch.arange(10)
    scores[20:30] = 0.5 - 0.01 * torch.arange(10)
    hidden = torch.randn(40, 2, generator=torch.Generator().manual_seed(5)) - 50.0
    hidden[20:25] = torch.tensor([[0.0, -0.5], [0.0, 0.0], [0.125, 0.0], [0.0, 0.25], [-0.375, 0.0]])
    hidden[25:30] = torch.tensor([[10.0, 10.0], [10.0625, 10.0], [10.0, 10.25], [9.625, 10.0], [10.0, 9.5]])
    text = 3
    embeddings = torch.randn(PREFIX + 40 + text, 2, generator=torch.Generator().manual_seed(6))
    attention = scores.expand(HEADS, text, -1).clone()
    return stage_inputs(0, hidden.to(dtype), attention, 40, embeddings.to(dtype), {})


def test_recycled_cluster_means_hand_computed():
    plan = sparsevlm_plan(0.25, TINY, layers=[0], fractions=[0.25])
    inputs = recycling_case()
    choice = plan.stages[0].choose(inputs)
    keep = choice.keep.tolist()
    assert sorted(keep) == list(range(10)) + [21, 25]
    tokens = {k: choice.tokens[i] for i, k in enumerate(keep)}
    video = inputs.hidden.index_select(0, inputs.visual)
    for k in range(10):  # kept tokens keep their own hidden state
        assert torch.equal(tokens[k], video[k])
    # DPC-kNN with c = 2 neighbours (self and the nearest): the densest pair of B (25, 26 at 0.0625)
    # puts its lower index first (the largest delta); A's densest pair is 21, 22 (0.125 apart; 21
    # by index), whose nearest denser token is in B. (With 1 neighbour every density would tie and
    # A's centre would be 20.) Each cluster's unweighted mean sits at its centre:
    # A = [(0.125 - 0.375) / 5, (0.25 - 0.5) / 5], B = [(50 + 0.0625 - 0.375) / 5, (50 + 0.25 - 0.5) / 5].
    assert torch.allclose(tokens[21], torch.tensor([-0.05, -0.05]), atol=1e-6)
    assert torch.allclose(tokens[25], torch.tensor([49.6875 / 5, 49.75 / 5]), atol=1e-6)
    assert choice.tokens.dtype == torch.float32


def test_bf16_hidden_states_give_the_same_choice():
    plan = sparsevlm_plan(0.25, TINY, layers=[0], fractions=[0.25])
    full = plan.stages[0].choose(recycling_case())
    half = plan.stages[0].choose(recycling_case(torch.bfloat16))  # the planted features are exact in bf16
    assert torch.equal(full.keep, half.keep)
    assert torch.allclose(full.tokens[-2:], half.tokens[-2:], atol=1e-6)  # the cluster means
    assert half.tokens.dtype == torch.float32


def test_ties_and_missing_text_keep_the_earliest_tokens():
    plan = sparsevlm_plan(0.25, TINY, layers=[0], fractions=[0.25])
    hidden = torch.randn(20, 3, generator=torch.Generator().manual_seed(8))
    embeddings = torch.randn(PREFIX + 20 + 2, 3)
    for attention in (torch.full((HEADS, 2, 20), 0.05), None):  # all tied / no text after the video
        choice = plan.stages[0].choose(stage_inputs(0, hidden, attention, 20, embeddings, {}))
        keep = choice.keep.tolist()
        # int(0.25 * 20) = 5 kept: 0..4; recycled: the first int(0.3 * 15) + 1 = 5 pruned (5..9), one cluster
        assert keep[:5] == [0, 1, 2, 3, 4] and len(keep) == 6 and 5 <= keep[5] <= 9
        assert torch.allclose(choice.tokens[5], hidden[5:10].mean(0), atol=1e-6)


@pytest.mark.parametrize("entry", [1, 2, 3])
def test_tiny_entry_counts(entry):
    plan = sparsevlm_plan(0.25, QWEN2)
    counts = run_stages(plan, torch.rand(entry, generator=torch.Generator().manual_seed(9)))
    assert counts == expected_counts(entry, [303 / 576, 110 / 576, 36 / 576], 1.0)
    assert all(1 <= c <= entry for c in counts)


def test_deterministic():
    plan = sparsevlm_plan(0.25, QWEN2)
    scores = torch.rand(300, generator=torch.Generator().manual_seed(10))
    assert run_stages(plan, scores) == run_stages(plan, scores)
    first, second = (plan.stages[0].choose(recycling_case()) for _ in range(2))
    assert torch.equal(first.keep, second.keep) and torch.equal(first.tokens, second.tokens)


def test_bad_parameters_name_themselves():
    for bad in ([5, 3, 10], [2, 2], [-1], [27], "2,5", [], [2.0]):
        with pytest.raises(ValueError, match="layers"):
            sparsevlm_plan(0.25, QWEN2, layers=bad, fractions=[0.5] * max(1, len(bad)))
    for bad in ([0.5, 0.2], [1.5, 0.2, 0.1], [0.0, 0.2, 0.1], "0.5", [float("nan"), 0.1, 0.1]):
        with pytest.raises(ValueError, match="fractions"):
            sparsevlm_plan(0.25, QWEN2, fractions=bad)
    with pytest.raises(ValueError, match="fractions"):  # the default schedule has three shares
        sparsevlm_plan(0.25, QWEN2, layers=[2, 5])
    with pytest.raises(ValueError, match="scores"):
        sparsevlm_plan(0.25, QWEN2, scores="full")
    with pytest.raises(ValueError, match="recycling"):
        sparsevlm_plan(0.25, QWEN2, recycling="yes")


# variant="official": Gumpest/SparseVLMs@26a5f48 arithmetic (our own known answers) ---------------


def official_plan(ratio: float = 0.25, llm: LLMInfo = QWEN2, **params):
    plan = sparsevlm_plan(ratio, llm, variant="official", **params)
    plan.check(llm)
    return plan


def test_official_variant_plan_and_refusal():
    assert official_plan().score_dtype == "model"  # the release's attention in the model dtype
    assert sparsevlm_plan(0.25, QWEN2).score_dtype == "float32"
    assert [s.layer for s in official_plan().stages] == [3, 6, 14]
    with pytest.raises(ValueError, match="'vidcom2_qwen'"):
        sparsevlm_plan(0.25, QWEN2, variant="vidcom2_qwen")
    with pytest.raises(ValueError, match="seed"):
        sparsevlm_plan(0.25, QWEN2, variant="official", seed=-1)
    with pytest.raises(ValueError, match="counts"):
        sparsevlm_plan(0.25, QWEN2, counts=[300, 200])
    with pytest.raises(ValueError, match="fractions and counts"):
        sparsevlm_plan(0.25, QWEN2, counts=[300, 200, 110], fractions=[0.5, 0.3, 0.2])


def test_official_merge_of_three_tokens_by_hand():
    """One cluster of 1, 2, 4: weights 1 / (3 + 1e-6) each, summed in token order.
    float32: w = 1/3.000001; ((w + 2w) + 4w) = 2.3333325 (not 7/3 = 2.3333333).
    bf16: 3 + 1e-6 rounds to 3; w = bf16(1/3) = 0.333984375; 0.333984375 + 0.66796875 = 1.001953125 -> 1.0;
    1.0 + 1.3359375 = 2.3359375 is halfway between 2.328125 and 2.34375 -> even mantissa: 2.34375."""
    x = torch.tensor([[1.0], [2.0], [4.0]])
    w = 1 / (torch.tensor(3.0) + 1e-6)
    got = official_cluster_and_merge(x, 1, torch.Generator().manual_seed(0))
    assert got.item() == ((1 * w + 2 * w) + 4 * w).item() == pytest.approx(2.3333325, abs=1e-7)
    assert got.item() != 7 / 3
    got16 = official_cluster_and_merge(x.bfloat16(), 1, torch.Generator().manual_seed(0))
    assert got16.dtype == torch.bfloat16 and got16.item() == 2.34375


def official_inputs(video: torch.Tensor, video_scores: torch.Tensor, text: int = 2, dim: int = 2) -> StageInputs:
    """Stage 0 of a row [PREFIX | N video | text]; every text row pays video token j ``video_scores[j]``;
    the layer-0 embeddings make text token 0 the one rater (visual rows e_0, text 0 = 2 e_0, others 0)."""
    count = video.shape[0]
    embeddings = torch.zeros(PREFIX + count + text, dim, dtype=video.dtype)
    embeddings[PREFIX : PREFIX + count, 0] = 1
    embeddings[PREFIX + count, 0] = 2
    inputs = stage_inputs(0, video, video_scores.float().expand(HEADS, text, -1).clone(), count, embeddings, {})
    return dataclasses.replace(inputs, attention=inputs.attention.to(video.dtype))  # score_dtype="model"


def test_official_recycled_means_sit_after_the_kept_tokens():
    """6 video tokens, keep 3 (scores 0.6, 0.5, 0.4 at 1, 3, 5); the 3 pruned (0, 2, 4, scores 0.3, 0.1, 0.2)
    give m = int(0.9) + 1 = 1 recycled token (0, the best) and one cluster: its mean x_0 / (1 + 1e-6).
    The release's sequence is [x_1, x_3, x_5, mean]: the 4 surviving slots are {0, 1, 3, 5} and the
    hidden states are written into them in that order (paper: the mean sits at slot 0)."""
    video = torch.arange(12, dtype=torch.float32).view(6, 2) + 1
    scores = torch.tensor([0.3, 0.6, 0.1, 0.5, 0.2, 0.4])
    inputs = official_inputs(video, scores)
    choice = official_plan(counts=[3, 2, 1]).stages[0].choose(inputs)
    assert choice.keep.tolist() == [0, 1, 3, 5]
    mean = video[0] * (1 / (torch.tensor(1.0) + 1e-6))
    assert torch.equal(choice.tokens, torch.stack([video[1], video[3], video[5], mean]))
    paper = sparsevlm_plan(0.25, QWEN2, counts=[3, 2, 1]).stages[0].choose(official_inputs(video, scores))
    order = torch.argsort(paper.keep)
    assert paper.keep[order].tolist() == [0, 1, 3, 5] and torch.equal(paper.tokens[order][0], video[0])


@pytest.mark.parametrize("count, clusters", [(10, 2), (11, 1)])
def test_official_cluster_count_at_the_boundary(count, clusters):
    """40 tokens: keep 10 -> 30 pruned -> m = int(9.0) + 1 = 10 -> int(10 / 10) + 1 = 2 clusters;
    keep 11 -> 29 pruned -> m = int(8.7) + 1 = 9 -> 1 cluster."""
    g = torch.Generator().manual_seed(1)
    video, scores = torch.randn(40, 3, generator=g), torch.rand(40, generator=g)
    choice = official_plan(counts=[count, 2, 1]).stages[0].choose(official_inputs(video, scores, dim=3))
    assert choice.keep.numel() == count + clusters == choice.tokens.shape[0]


def test_official_keeps_at_most_all_but_one():
    video, scores = torch.randn(5, 2), torch.tensor([0.5, 0.4, 0.3, 0.2, 0.1])
    choice = official_plan(counts=[303, 110, 36]).stages[0].choose(official_inputs(video, scores))
    # min(303, 5 - 1) = 4 kept; 1 pruned -> m = 1 -> 1 cluster: slots {0..4}, the mean of token 4 last
    assert choice.keep.tolist() == [0, 1, 2, 3, 4]
    assert torch.equal(choice.tokens[:4], video[:4])


def test_official_raters_hand_computed():
    """E_vis = [[1, 0], [1, 0]], E_text = [[2, 0], [0, 0], [0, 0]]: each visual row's products (2, 0, 0),
    softmax (e^2, 1, 1) / (e^2 + 2) = (0.787, 0.106, 0.106); above the mean 1/3: text token 0."""
    emb = torch.tensor([[9.0, 9.0], [1, 0], [1, 0], [2, 0], [0, 0], [0, 0]])
    for dtype in (torch.float32, torch.bfloat16):
        assert official_raters(emb.to(dtype), torch.tensor([1, 2]), 3).tolist() == [0]


def test_official_one_text_token_has_no_rater_and_nan_scores():
    """The release's ``r > mean(r)`` with one text token (softmax 1 > 1 is False): no rater, the
    rater mean is NaN; ``topk`` still keeps min(count, v - 1) tokens."""
    emb = torch.randn(PREFIX + 6 + 1, 2)
    assert official_raters(emb, torch.arange(PREFIX, PREFIX + 6), 1).numel() == 0
    inputs = stage_inputs(0, torch.randn(6, 2), torch.rand(HEADS, 1, 6), 6, emb, {})
    choice = official_plan(counts=[3, 2, 1]).stages[0].choose(inputs)
    assert choice.keep.numel() == 4


def test_official_is_deterministic_per_seed_and_leaves_the_global_rng_alone():
    g = torch.Generator().manual_seed(3)
    video, scores = torch.randn(60, 4, generator=g), torch.rand(60, generator=g)
    state = torch.random.get_rng_state()
    first = official_plan(counts=[10, 5, 2], seed=5).stages[0].choose(official_inputs(video, scores, dim=4))
    again = official_plan(counts=[10, 5, 2], seed=5).stages[0].choose(official_inputs(video, scores, dim=4))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(first.keep, again.keep) and torch.equal(first.tokens, again.tokens)


def test_official_bf16_follows_the_model_dtype():
    """bf16 hidden states: the merged tokens are bf16 and differ from the float32 run (paper: the same
    kept tokens for both dtypes, float32 means)."""
    g = torch.Generator().manual_seed(4)
    video, scores = torch.randn(40, 8, generator=g), torch.rand(40, generator=g)
    f32 = official_plan(counts=[10, 5, 2]).stages[0].choose(official_inputs(video, scores, dim=8))
    b16 = official_plan(counts=[10, 5, 2]).stages[0].choose(official_inputs(video.bfloat16(), scores.bfloat16(), dim=8))
    assert b16.tokens.dtype == torch.bfloat16 and f32.tokens.dtype == torch.float32
    assert torch.equal(f32.keep, b16.keep)
    assert not torch.equal(f32.tokens[-2:].bfloat16(), b16.tokens[-2:])  # the means: bf16 arithmetic
