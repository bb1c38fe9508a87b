"""FastV (baselines/fastv/): the three variants' counts, scores and plans, by hand.

- ``official``: Python's ``round`` of ``N * (1 - R)`` (halves to even), the head mean taken in
  the attention's dtype (a bf16 model's rounded probabilities change a choice that float32 and
  ``paper`` make otherwise), ``topk`` order.
- ``vidcom2_qwen``: the column mean of a hand-made causal attention, ``max(1, int(N r))``, the
  drop after layer K = 2 (before layer 3), and the plan's two reproduced bugs: DeepStack
  before the layers, the post-drop mask by original positions.
StageInputs are built by hand the way vcast.models.layer_drops hands them over.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

import vcast
from baselines.fastv.method import fastv_plan
from baselines.fastv.official import official_count
from baselines.fastv.vidcom2_qwen import vidcom2_count
from vcast import registry
from vcast.models.layer_drops import LayerDrops, VideoTags
from vcast.families import get_family
from vcast.models.llm_plan import LLMInfo, LLMPlan, StageInputs

QWEN2 = LLMInfo.of(get_family("llava_onevision"), 28)
QWEN3 = LLMInfo.of(get_family("qwen3_vl"), 36)


def inputs(attention: torch.Tensor, visual: list[int]) -> StageInputs:
    """One row: ``attention`` [H, R, S] over S columns, video tokens at ``visual``."""
    visual_t = torch.tensor(visual)
    n = visual_t.numel()
    zeros = torch.zeros(n, dtype=torch.long)
    width = attention.shape[-1]
    return StageInputs(stage=0, layer=2, num_layers=28, hidden=torch.zeros(width, 4), visual=visual_t, frames=zeros,
                       patches=torch.arange(n), videos=zeros, rows=torch.tensor([width - 1]), attention=attention,
                       entry_tokens=n, embeddings=torch.zeros(width, 4), entry_visual=visual_t, state={})


def choose(variant: str, attention: torch.Tensor, visual: list[int], ratio: float) -> list[int]:
    plan = fastv_plan(ratio, QWEN2, variant=variant)
    return sorted(plan.stages[0].choose(inputs(attention, visual)).keep.tolist())


def test_registered_with_its_variants():
    assert registry.method_variants("fastv") == ("paper", "official", "vidcom2_qwen")
    assert vcast.method_params("fastv") == {"layer": None, "budget": "after_drop", "scores": "rows", "variant": "paper"}
    with pytest.raises(ValueError, match="'bogus'"):
        fastv_plan(0.25, QWEN2, variant="bogus")


def test_official_count_rounds_halves_to_even():
    # N * 0.25 = 0.5, 1.5, 2.5, 3.5, 4.5 -> 0, 2, 2, 4, 4 (Python's round); paper rounds halves up, at least 1
    assert [official_count(n, 0.25) for n in (2, 6, 10, 14, 18)] == [0, 2, 2, 4, 4]
    flat = torch.full((1, 1, 20), 0.05)
    for n, official, paper in ((2, 0, 1), (6, 2, 2), (10, 2, 3), (14, 4, 4), (18, 4, 5)):
        assert len(choose("official", flat, list(range(1, n + 1)), 0.25)) == official
        assert len(choose("paper", flat, list(range(1, n + 1)), 0.25)) == paper
    # not a half: the same count either way
    assert official_count(7, 0.25) == 2 and official_count(9, 0.25) == 2 and official_count(11, 0.5) == 6


def test_official_head_mean_in_bf16_changes_a_choice():
    # 4 heads, keys 1 and 2 are the video. float32 head means: 0.5019 (key 1) > 0.501845 (key 2).
    # In bf16 (the eager kernel's probabilities): 0.5019 -> 0.5 (below the midpoint 0.501953125),
    # 0.50196 -> 0.50390625, 0.5015 -> 0.5, so key 2's mean is (3 * 0.50390625 + 0.5) / 4 =
    # 0.5029296875 -> 0.50390625 in bf16 > key 1's 0.5. Keeping round(2 * 0.5) = 1 token:
    attention = torch.zeros(4, 1, 4)
    attention[:, 0, 1] = 0.5019
    attention[:, 0, 2] = torch.tensor([0.50196, 0.50196, 0.50196, 0.5015])
    assert choose("official", attention, [1, 2], 0.5) == [0]  # float32 scores (our indices into visual)
    assert choose("official", attention.to(torch.bfloat16), [1, 2], 0.5) == [1]
    assert choose("paper", attention, [1, 2], 0.5) == [0]
    assert fastv_plan(0.5, QWEN2).score_dtype == "float32"  # paper asks for float32 whatever the model
    assert fastv_plan(0.5, QWEN2, variant="official").score_dtype == "model"


def test_official_plan():
    plan = fastv_plan(0.25, QWEN2, variant="official")
    plan.check(QWEN2)
    (stage,) = plan.stages
    assert (stage.layer, stage.score_layer, stage.queries, plan.positions) == (2, 1, "last", "original")
    assert (plan.score_scale, plan.deepstack, plan.post_drop_causal) == ("multiply", "after", "kept")
    assert fastv_plan(0.25, LLMInfo("tiny", 2), variant="official").stages[0].layer == 1


def test_vidcom2_qwen_column_mean_on_a_hand_made_attention():
    # S = 5: [text, v, v, v, text]; one head each of two, causal rows (each sums to 1).
    head0 = torch.tensor([[1.0, 0, 0, 0, 0],
                          [0.5, 0.5, 0, 0, 0],
                          [0.2, 0.2, 0.6, 0, 0],
                          [0.1, 0.1, 0.1, 0.7, 0],
                          [0.1, 0.5, 0.1, 0.1, 0.2]])
    head1 = torch.tensor([[1.0, 0, 0, 0, 0],
                          [0.5, 0.5, 0, 0, 0],
                          [0.4, 0.4, 0.2, 0, 0],
                          [0.1, 0.1, 0.1, 0.7, 0],
                          [0.1, 0.1, 0.1, 0.1, 0.6]])
    attention = torch.stack([head0, head1])  # [H, S, S]: every query row
    # head mean, then the mean over the 5 rows: columns 1, 2, 3 -> (0.5+0.3+0.1+0.3)/5 = 0.24,
    # (0.4+0.1+0.1)/5 = 0.12, (0.7+0.1)/5 = 0.16. The last row alone (FastV) would rank 1 > 3 > 2 too,
    # but give 2 and 3 a tie (0.1, 0.1); the column mean keeps {1, 3} at max(1, int(3 * 0.7)) = 2.
    assert choose("vidcom2_qwen", attention, [1, 2, 3], 0.7) == [0, 2]
    # a column high in early rows only: key 2 gets 0.9 from row 2 in both heads
    spiky = attention.clone()
    spiky[:, 2, :3] = torch.tensor([0.05, 0.05, 0.9])
    # column means: key 1 (0.5+0.05+0.1+0.3)/5 = 0.19, key 2 (0.9+0.1+0.1)/5 = 0.22, key 3 0.16
    assert choose("vidcom2_qwen", spiky, [1, 2, 3], 0.34) == [1]  # max(1, int(1.02)) = 1
    # the official last-row rule on the same input would keep key 1 (0.3 vs 0.1 / 0.1)
    assert choose("official", spiky[:, -1:], [1, 2, 3], 0.34) == [0]


def test_vidcom2_qwen_counts_and_plan():
    assert [vidcom2_count(n, 0.25) for n in (1, 3, 4, 7, 10)] == [1, 1, 1, 1, 2]
    plan = fastv_plan(0.25, QWEN3, variant="vidcom2_qwen")
    plan.check(QWEN3)
    (stage,) = plan.stages
    assert (stage.layer, stage.score_layer, stage.queries) == (3, 2, "all")  # FASTV_K = 2: pruned after layer 2
    assert (plan.score_dtype, plan.deepstack, plan.post_drop_causal, plan.positions) == (
        "model", "before", "original_positions", "original")
    assert fastv_plan(0.25, LLMInfo("tiny", 3), variant="vidcom2_qwen").stages[0].layer == 2


def test_plan_fields_are_checked():
    for name in ("score_dtype", "score_scale", "deepstack", "post_drop_causal"):
        with pytest.raises(ValueError, match=name):
            LLMPlan(stages=(), **{name: "bogus"}).check(QWEN2)


class _Layer(nn.Module):
    def forward(self, hidden: torch.Tensor, **kwargs) -> torch.Tensor:
        return hidden * 2.0


class _LanguageModel(nn.Module):
    def __init__(self, layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Layer() for _ in range(layers))
        self.config = SimpleNamespace(_attn_implementation="sdpa")


@pytest.mark.parametrize("mode", ["after", "before"])
def test_deepstack_before_the_layers(mode: str):
    # 4 tokens, visual at 1 and 2; two DeepStack features. Layers double their input.
    language_model = _LanguageModel(3)
    drops = LayerDrops(language_model, LLMPlan(stages=(), deepstack=mode), LLMInfo.of(get_family("qwen3_vl"), 3))
    embeds = torch.zeros(1, 4, 1)
    visual = torch.tensor([[False, True, True, False]])
    features = [torch.tensor([[1.0], [10.0]]), torch.tensor([[100.0], [1000.0]])]
    frame = torch.tensor([[-1, 0, 0, -1]])
    tags = VideoTags(frame, torch.tensor([[-1, 0, 1, -1]]), torch.tensor([[-1, 0, 0, -1]]))
    kwargs = drops.begin_prefill({"inputs_embeds": embeds, "attention_mask": None, "deepstack_visual_embeds": features,
                                  "visual_pos_masks": visual}, tags)
    hidden = kwargs["inputs_embeds"]
    for layer in language_model.layers:
        hidden = layer(hidden)
    drops.end_prefill()
    drops.remove()
    if mode == "after":  # HF: feature i after layer i: ((0*2 + f0)*2 + f1)*2
        expected = [0.0, (1 * 2 + 100) * 2, (10 * 2 + 1000) * 2, 0.0]
    else:  # VidCom2 qwen FastV: feature i before layer i: ((f0*2 + f1)*2)*2
        expected = [0.0, (1 * 2 + 100) * 4, (10 * 2 + 1000) * 4, 0.0]
    assert hidden[0, :, 0].tolist() == expected


def test_post_drop_mask_by_original_positions():
    # kept layer-0 columns [0, 2, 5, 6]: slot i sees slots j <= column[i] (the leak), all valid
    drops = SimpleNamespace(implementation="sdpa")
    columns = torch.tensor([[0, 2, 5, 6]])
    allowed = LayerDrops._original_positions_mask(drops, columns, torch.ones(1, 4, dtype=torch.bool), torch.float32)
    assert allowed[0, 0].int().tolist() == [[1, 0, 0, 0],
                                            [1, 1, 1, 0],
                                            [1, 1, 1, 1],
                                            [1, 1, 1, 1]]
    drops.implementation = "eager"  # additive in the model's dtype
    additive = LayerDrops._original_positions_mask(drops, columns, torch.ones(1, 4, dtype=torch.bool), torch.bfloat16)
    assert additive.dtype == torch.bfloat16 and float(additive[0, 0, 0, 1]) == torch.finfo(torch.bfloat16).min
    assert float(additive[0, 0, 1, 2]) == 0.0
