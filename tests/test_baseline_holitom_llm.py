"""HoliTom with its inner-LLM merge (``holitom_llm``): the plan, the ratio conventions and the inner
step's choice and sequential merge on hand-built StageInputs."""

from __future__ import annotations

import pytest
import torch

import vcast
from baselines.holitom_llm.budget import inner_keep_count
from baselines.holitom_llm.paper import sequential_merge
from vcast.models.llm_plan import LLMInfo, StageInputs
from vcast.registry import get_method, is_llm_method, method_inputs

METHOD = "holitom_llm"


def plan_for(ratio: float, num_layers: int = 28, **params):
    llm = LLMInfo("test", num_layers)
    plan = get_method(METHOD)(ratio, llm, **params)
    plan.check(llm)
    return plan


def stage_inputs(hidden_visual: torch.Tensor, last_scores: torch.Tensor, heads: int = 2) -> StageInputs:
    """A row ``[text, N video tokens, text, last]``: the video tokens' hidden states are
    ``hidden_visual`` [N, C]; the last row's attention is ``last_scores`` on them in every head but
    shifted by +-0.05 between the two heads (so only the head mean gives ``last_scores``)."""
    count, dim = hidden_visual.shape
    width = count + 3
    hidden = torch.zeros(width, dim, dtype=hidden_visual.dtype)
    hidden[1 : 1 + count] = hidden_visual
    attention = torch.zeros(heads, 1, width)
    attention[:, 0, 1 : 1 + count] = last_scores.float()
    attention[0, 0, 1 : 1 + count] += 0.05 * torch.arange(count) / count
    attention[1, 0, 1 : 1 + count] -= 0.05 * torch.arange(count) / count
    visual = torch.arange(1, 1 + count)
    return StageInputs(
        stage=0, layer=18, num_layers=28, hidden=hidden, visual=visual, frames=torch.zeros(count, dtype=torch.long),
        patches=torch.arange(count), videos=torch.zeros(count, dtype=torch.long), rows=torch.tensor([width - 1]),
        attention=attention, entry_tokens=count, embeddings=hidden, entry_visual=visual, state={},
    )


def reference_loop(hidden: torch.Tensor, kept: torch.Tensor, merged: torch.Tensor) -> torch.Tensor:
    """The official loop, literally: similarities once, then h[t] = (h[t] + h[j]) / 2 in order."""
    h = hidden.double().clone()
    unit = torch.nn.functional.normalize
    target = (unit(h[merged], dim=-1) @ unit(h[kept], dim=-1).T).argmax(dim=1)
    for j, t in zip(merged.tolist(), target.tolist()):
        h[kept[t]] = (h[kept[t]] + h[j]) / 2
    return h[kept]


# Registration and plans -----------------------------------------------------------------------
def test_registered_with_the_outer_step_input() -> None:
    assert METHOD in vcast.available_methods()
    assert is_llm_method(METHOD)
    assert method_inputs(METHOD) == ("vision_attention",)


@pytest.mark.parametrize("num_layers,layer", [(28, 18), (32, 21), (36, 23), (2, 1), (3, 2)])
def test_plan_layers_and_pre_method(num_layers: int, layer: int) -> None:
    plan = plan_for(0.25, num_layers)
    (stage,) = plan.stages
    assert (stage.layer, stage.score_layer, stage.queries) == (layer, layer - 1, "last")
    assert stage.rotary and stage.causal
    assert plan.positions == "original" and plan.scores == "rows"
    assert plan.pre_method == "holitom" and plan.pre_ratio == 0.25
    assert plan.pre_params == {"tau": None, "beta": 0.6, "dominant_fraction": 0.0, "dpc_k": 7, "max_window": 1024}


def test_plan_passes_outer_params_layer_and_eager_scores() -> None:
    plan = plan_for(0.15, 28, layer=3, tau=0.65, beta=0.5, dominant_fraction=0.2, dpc_k=5, max_window=8,
                    scores="eager")
    assert plan.stages[0].layer == 3 and plan.scores == "eager"
    assert plan.pre_params == {"tau": 0.65, "beta": 0.5, "dominant_fraction": 0.2, "dpc_k": 5, "max_window": 8}


def test_budget_conventions() -> None:
    assert plan_for(0.25, budget="pre_llm").pre_ratio == 0.25
    assert plan_for(0.25, budget="after_drop").pre_ratio == pytest.approx(0.5)
    # rho = p (18 + 10 * 0.5) / 28 = 0.25  ->  p = 0.25 * 28 / 23
    assert plan_for(0.25, budget="layer_average").pre_ratio == pytest.approx(0.25 * 28 / 23)
    assert plan_for(0.25, budget="after_drop", r_inner=0.2).pre_ratio == pytest.approx(0.3125)
    assert plan_for(0.25, budget="layer_average", r_inner=0.2).pre_ratio == pytest.approx(0.25 * 28 / (18 + 10 * 0.8))
    with pytest.raises(ValueError, match="ratio"):
        plan_for(0.6, budget="after_drop")
    with pytest.raises(ValueError, match="ratio"):
        plan_for(0.9, budget="layer_average")


@pytest.mark.parametrize("params,name", [
    ({"layer": 0}, "layer"), ({"layer": 28}, "layer"), ({"layer": 2.5}, "layer"), ({"r_inner": 1.0}, "r_inner"),
    ({"r_inner": -0.1}, "r_inner"), ({"budget": "final"}, "budget"), ({"scores": "flash"}, "scores"),
    ({"tau": 1.5}, "tau"), ({"beta": 2}, "beta"), ({"dominant_fraction": -1}, "dominant_fraction"),
    ({"dpc_k": 0}, "dpc_k"), ({"max_window": 0}, "max_window"),
])
def test_bad_parameters_are_named(params: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        plan_for(0.25, **params)


# The inner step ---------------------------------------------------------------------------------
def test_keep_count_is_pythons_round() -> None:
    assert inner_keep_count(5, 0.5) == 2  # round(2.5) = 2 (half to even, as the official round)
    assert inner_keep_count(7, 0.5) == 4  # round(3.5) = 4
    assert inner_keep_count(10, 0.3) == 7
    assert inner_keep_count(1, 0.5) == 1  # at least one
    assert inner_keep_count(6, 0.0) == 6


def test_sequential_merge_by_hand_on_2d_vectors() -> None:
    # Video tokens in sequence order: j1, t0, j2, t1, j3; the last token attends t0 and t1.
    hidden = torch.tensor([[2.0, 0.1], [1.0, 0.0], [0.1, 3.0], [0.0, 1.0], [4.0, 0.0]])
    scores = torch.tensor([0.1, 0.4, 0.1, 0.3, 0.1])
    choice = plan_for(0.25).stages[0].choose(stage_inputs(hidden, scores))
    assert choice.keep.tolist() == [1, 3]  # round(5 * 0.5) = 2 kept
    # t0 <- (t0 + j1) / 2 = (1.5, 0.05), then (t0 + j3) / 2 = (2.75, 0.025); t1 <- (t1 + j2) / 2.
    # (j3 first would give (2.25, 0.05): the order matters.)
    expected = torch.tensor([[2.75, 0.025], [0.05, 2.0]])
    assert torch.allclose(choice.tokens, expected, atol=1e-6)


def test_similarities_are_taken_before_any_merge() -> None:
    # t0 = (1, 0), t1 = (0, 1); j0 = (10, 0.5) joins t0 first, making it (5.5, 0.25). j = (0.7, 0.72)
    # is closer to t1 on the original states (cos 0.717 vs 0.697) but would be closer to the merged
    # t0 (cos 0.729): taken once before the loop, it still joins t1.
    hidden = torch.tensor([[1.0, 0.0], [0.0, 1.0], [10.0, 0.5], [0.7, 0.72]])
    scores = torch.tensor([0.5, 0.4, 0.0, 0.0])
    choice = plan_for(0.25).stages[0].choose(stage_inputs(hidden, scores))
    expected = reference_loop(hidden, torch.tensor([0, 1]), torch.tensor([2, 3])).float()
    assert torch.allclose(choice.tokens, expected, atol=1e-6)
    assert torch.allclose(choice.tokens[1], torch.tensor([0.35, 0.86]), atol=1e-6)


def test_closed_form_equals_the_loop_on_random_states() -> None:
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(300, 8, generator=generator)
    kept = torch.sort(torch.randperm(300, generator=generator)[:20]).values
    rest = torch.ones(300, dtype=torch.bool)
    rest[kept] = False
    merged = rest.nonzero().squeeze(1)
    out = sequential_merge(hidden, kept, merged)
    assert torch.allclose(out.double(), reference_loop(hidden, kept, merged), atol=1e-5)
    # Some kept tokens receive many merges (weights down to 2^-m).
    unit = torch.nn.functional.normalize
    received = torch.bincount((unit(hidden[merged], dim=-1) @ unit(hidden[kept], dim=-1).T).argmax(1), minlength=20)
    assert int(received.max()) >= 20


def test_planted_high_attention_tokens_are_kept_and_ties_go_low() -> None:
    hidden = torch.randn(10, 4, generator=torch.Generator().manual_seed(1))
    scores = torch.full((10,), 0.1)
    scores[[7, 2, 9]] = torch.tensor([0.9, 0.8, 0.7])
    keep = plan_for(0.25, r_inner=0.7).stages[0].choose(stage_inputs(hidden, scores)).keep
    assert keep.tolist() == [2, 7, 9]  # round(10 * 0.3) = 3
    keep = plan_for(0.25, r_inner=0.5).stages[0].choose(stage_inputs(hidden, scores)).keep
    assert keep.tolist() == [0, 1, 2, 7, 9]  # then the lowest of the tied 0.1s


def test_similarity_ties_go_to_the_earlier_kept_token() -> None:
    # j = (1, 1) is equally similar to t0 = (1, 0) and t1 = (0, 1): it joins t0.
    hidden = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    choice = plan_for(0.25, r_inner=0.4).stages[0].choose(stage_inputs(hidden, torch.tensor([0.5, 0.5, 0.0])))
    assert choice.keep.tolist() == [0, 1]
    assert torch.allclose(choice.tokens, torch.tensor([[1.0, 0.5], [0.0, 1.0]]))


def test_no_merge_is_a_no_op() -> None:
    hidden = torch.randn(4, 3)
    choice = plan_for(0.25, r_inner=0.0).stages[0].choose(stage_inputs(hidden, torch.rand(4)))
    assert choice.keep.tolist() == [0, 1, 2, 3] and choice.tokens is None
    choice = plan_for(0.25).stages[0].choose(stage_inputs(hidden[:1], torch.rand(1)))
    assert choice.keep.tolist() == [0] and choice.tokens is None


def test_bf16_hidden_states_match_their_float32_upcast() -> None:
    hidden = torch.randn(40, 16, generator=torch.Generator().manual_seed(2)).bfloat16()
    scores = torch.rand(40, generator=torch.Generator().manual_seed(3))
    stage = plan_for(0.25).stages[0]
    low = stage.choose(stage_inputs(hidden, scores))
    high = stage.choose(stage_inputs(hidden.float(), scores))
    assert torch.equal(low.keep, high.keep) and low.keep.numel() == 20
    assert low.tokens.dtype == torch.float32 and torch.equal(low.tokens, high.tokens)


def test_outer_step_then_inner_count() -> None:
    """The outer step (as the plan runs it) keeps floor(r T P); the inner step round(N / 2) of them."""
    plan = plan_for(0.25)
    frames = torch.randn(8, 16, 12, generator=torch.Generator().manual_seed(4))
    attention = torch.rand(8, 16, generator=torch.Generator().manual_seed(5))
    sel = vcast.select(frames, plan.pre_ratio, method=plan.pre_method, vision_attention=attention, **plan.pre_params)
    assert sel.keep.numel() == 32
    choice = plan.stages[0].choose(stage_inputs(sel.tokens, torch.rand(32)))
    assert choice.keep.numel() == 16 and choice.tokens.shape == (16, 12)


# variant="official": the release's inner merge in the model dtype ------------------------------
def test_variants_registered_and_plan_runs_the_official_outer_step() -> None:
    from vcast.registry import method_variants

    assert method_variants(METHOD) == ("paper", "official")
    plan = plan_for(0.25, variant="official", seed=5)
    assert plan.pre_method == "holitom"
    assert plan.pre_params == {"tau": None, "beta": 0.6, "dominant_fraction": 0.0, "dpc_k": 7, "max_window": 1024,
                               "variant": "official", "seed": 5}
    with pytest.raises(ValueError, match="vidcom2_qwen"):
        plan_for(0.25, variant="vidcom2_qwen")
    with pytest.raises(ValueError, match="seed"):
        plan_for(0.25, variant="official", seed=-2)


def test_official_merge_order_is_the_sequence_order() -> None:
    """One kept token t = (8, 0) then j1 = (4, 0), j2 = (2, 0) (all cos 1): (8+4)/2 = 6, (6+2)/2 = 4
    (j2 first would give 4.5)."""
    hidden = torch.tensor([[8.0, 0.0], [4.0, 0.0], [2.0, 0.0]])
    choice = plan_for(0.25, r_inner=0.7, variant="official").stages[0].choose(
        stage_inputs(hidden, torch.tensor([0.6, 0.2, 0.1])))
    assert choice.keep.tolist() == [0]  # round(3 * 0.3) = 1
    assert choice.tokens.tolist() == [[4.0, 0.0]]


def test_official_bf16_rounds_at_every_step() -> None:
    """t = (1, 0), j1 = j2 = (1 + 2^-7, 0). bf16 loop: 1 + 1.0078125 = 2.0078125 is a tie between
    2 and 2.015625 -> 2 (even), / 2 = 1; again 1. float32: 1.00390625, then 1.005859375; the
    paper closed form gives 1.005859375 for bf16 input too (float32 out)."""
    hidden = torch.tensor([[1.0, 0.0], [1.0078125, 0.0], [1.0078125, 0.0]])
    scores = torch.tensor([0.6, 0.2, 0.1])
    official = plan_for(0.25, r_inner=0.7, variant="official").stages[0]
    low = official.choose(stage_inputs(hidden.bfloat16(), scores))
    high = official.choose(stage_inputs(hidden, scores))
    assert low.tokens.dtype == torch.bfloat16 and low.tokens.float().tolist() == [[1.0, 0.0]]
    assert high.tokens.dtype == torch.float32 and high.tokens.tolist() == [[1.005859375, 0.0]]
    paper = plan_for(0.25, r_inner=0.7).stages[0].choose(stage_inputs(hidden.bfloat16(), scores))
    assert paper.tokens.tolist() == [[1.005859375, 0.0]]


def test_official_similarity_ties_go_to_the_higher_attention_kept_token() -> None:
    """Kept (1, 0) (score 0.3) and (2, 0) (score 0.6); j = (3, 0) is equally similar to both. The
    release's columns are in ``topk`` order, so j joins (2, 0): (2.5, 0). Paper: the earlier one."""
    hidden = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    scores = torch.tensor([0.3, 0.6, 0.1])
    official = plan_for(0.25, r_inner=0.4, variant="official").stages[0].choose(stage_inputs(hidden, scores))
    assert official.keep.tolist() == [0, 1]  # round(3 * 0.6) = 2
    assert official.tokens.tolist() == [[1.0, 0.0], [2.5, 0.0]]
    paper = plan_for(0.25, r_inner=0.4).stages[0].choose(stage_inputs(hidden, scores))
    assert paper.tokens.tolist() == [[2.0, 0.0], [2.0, 0.0]]


def test_official_matches_the_literal_loop_on_random_states() -> None:
    """Our merge rounds (all m-th merges at once) against a literal per-token loop, in bf16."""
    from baselines.holitom_llm.official import official_merge

    generator = torch.Generator().manual_seed(6)
    hidden = torch.randn(120, 8, generator=generator).bfloat16()
    top = torch.randperm(120, generator=generator)[:10]
    rest = torch.ones(120, dtype=torch.bool)
    rest[top] = False
    merged = rest.nonzero().squeeze(1)
    out = official_merge(hidden, top, merged)
    h = hidden.clone()
    similarity = torch.bmm(h[merged][None], h[top][None].transpose(1, 2)) / (
        torch.norm(h[merged][None], dim=-1, keepdim=True) * torch.norm(h[top][None], dim=-1, keepdim=True).transpose(1, 2))
    for j, t in zip(merged.tolist(), torch.max(similarity, dim=-1).indices[0].tolist()):
        h[top[t]] = (h[top[t]] + h[j]) / 2
    assert out.dtype == torch.bfloat16 and torch.equal(out, h[top])


def test_official_no_merge_and_at_least_one() -> None:
    hidden = torch.randn(4, 3)
    official = plan_for(0.25, r_inner=0.0, variant="official").stages[0]
    choice = official.choose(stage_inputs(hidden, torch.rand(4)))
    assert choice.keep.tolist() == [0, 1, 2, 3] and choice.tokens is None
    # round(1 * 0.5) = 0 would make the release fail; one token stays.
    choice = plan_for(0.25, variant="official").stages[0].choose(stage_inputs(hidden[:1], torch.rand(1)))
    assert choice.keep.tolist() == [0] and choice.tokens is None
