"""FlashVID: the vision-side compressor ``flashvid_merge`` (baselines/flashvid_merge/) and the in-LLM
planner ``flashvid`` (baselines/flashvid/).

Planted videos: P orthogonal basis tokens ``e_i`` (plus small noise) and an attention that makes
tokens 1, 3, 4 the ADTS picks of every frame (1.0, 0.9, 0.8 against 0.01), so that the other
tokens' temporal trees, means and positions can be written down by hand.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

import vcast
from baselines.flashvid_merge.paper import (
    adts_select,
    event_relevance,
    frame_budget,
    segment_lengths,
)
from baselines.flashvid_merge.params import ceil_share
from vcast import registry
from vcast.families import get_family
from vcast.models.llm_plan import LLMInfo, StageInputs
from vcast.synthetic_features import synthetic_video_features

PLANTED_ATTENTION = [0.01, 1.0, 0.01, 0.9, 0.8, 0.01]  # ADTS picks {1, 3, 4}


def _attention(num_frames: int, tokens_per_frame: int, seed: int = 1) -> torch.Tensor:
    return torch.rand(num_frames, tokens_per_frame, generator=torch.Generator().manual_seed(seed))


def _select(frames: torch.Tensor, ratio: float, attention: torch.Tensor | None = None, **params):
    if attention is None:
        attention = _attention(frames.shape[0], frames.shape[1])
    return vcast.select(frames, ratio, method="flashvid_merge", vision_attention=attention, **params)


def _planted(num_frames: int, tokens_per_frame: int, dim: int, noise: float = 0.01, seed: int = 0):
    """Frames of basis tokens ``e_i`` + noise, and the planted attention."""
    generator = torch.Generator().manual_seed(seed)
    frames = torch.eye(tokens_per_frame, dim).expand(num_frames, -1, -1).clone()
    frames += noise * torch.randn(frames.shape, generator=generator)
    attention = torch.tensor(PLANTED_ATTENTION[:tokens_per_frame]).expand(num_frames, -1).clone()
    return frames, attention


def _hand_budget(tokens_per_frame: int, ratio: float) -> int:
    """b = min(ceil(P * r * 1.25), P), on the decimal values."""
    return min(math.ceil(tokens_per_frame * Fraction(repr(ratio)) * Fraction(5, 4)), tokens_per_frame)


def _distinct_frames(num_frames: int, tokens_per_frame: int, seed: int = 0) -> torch.Tensor:
    """Every frame a new scene: every transition is a cut, every frame its own segment."""
    cuts = tuple(range(1, num_frames))
    return synthetic_video_features(num_frames, tokens_per_frame, 32, scene_cuts=cuts, seed=seed).features


# ----------------------------------------------------------------------------- registration, budget


def test_registered_with_official_defaults():
    assert "flashvid_merge" in vcast.available_methods() and "flashvid" in vcast.available_methods()
    assert registry.method_inputs("flashvid_merge") == ("vision_attention",)
    assert registry.method_inputs("flashvid") == ("vision_attention",)
    assert registry.is_llm_method("flashvid") and not registry.is_llm_method("flashvid_merge")
    assert vcast.method_params("flashvid_merge") == {
        "selection": "attn_div_v2", "alpha": 0.7, "expansion": 1.25, "segment_threshold": 0.9,
        "min_segment_num": 8, "temporal_threshold": 0.8, "variant": "paper", "seed": 0,
    }
    assert vcast.method_params("flashvid") == {
        "layer": None, "llm_retention": None, "min_segment_num": None, "selection": None, "alpha": 0.7,
        "expansion": 1.25, "segment_threshold": 0.9, "temporal_threshold": 0.8, "scores": "rows",
        "variant": "paper", "seed": 0,
    }
    assert registry.method_variants("flashvid_merge") == ("paper", "official")
    assert registry.method_variants("flashvid") == ("paper", "official")


@pytest.mark.parametrize("tokens_per_frame, ratio, expected", [
    (196, 0.25, (62, 44, 18)),   # 61.25 -> 62; 43.4 -> 44
    (16, 0.25, (5, 4, 1)),       # 5.0 exactly; 3.5 -> 4
    (10, 0.24, (3, 3, 0)),       # 3.0 exactly; 2.1 -> 3
    (100, 0.28, (35, 25, 10)),   # 35 exactly (the official float 100*0.28*1.25 = 35.00000000000001 -> 36)
    (3, 1.0, (3, 3, 0)),         # 3.75 -> 4, capped at P
    (1, 0.1, (1, 1, 0)),
])
def test_frame_budget(tokens_per_frame, ratio, expected):
    assert frame_budget(tokens_per_frame, ratio, 1.25, 0.7) == expected
    assert ceil_share(10, 0.3) == 3 and ceil_share(10, 0.21) == 3 and ceil_share(7, 1.0) == 7
    assert ceil_share(100, 0.07) == 7  # float: 100 * 0.07 = 7.000000000000001 -> 8


# ----------------------------------------------------------------------------- counts


@pytest.mark.parametrize("num_frames, tokens_per_frame, ratio, expected", [
    (8, 16, 0.25, 40), (5, 49, 0.15, 50), (12, 30, 0.35, 168), (3, 7, 0.5, 15), (6, 4, 1.0, 24),
    (4, 196, 0.1, 100),
])
def test_exact_count_when_every_frame_is_a_segment(num_frames, tokens_per_frame, ratio, expected):
    """Single-frame segments keep exactly b = A + S each: K = T * b."""
    assert expected == num_frames * _hand_budget(tokens_per_frame, ratio)
    frames = _distinct_frames(num_frames, tokens_per_frame)
    assert segment_lengths(frames.mean(1), 0.9, 1) == [1] * num_frames  # the premise
    sel = _select(frames, ratio, min_segment_num=1)
    assert sel.keep.numel() == expected and int(sel.budgets.sum()) == expected
    assert torch.all(sel.keep[1:] > sel.keep[:-1])  # ascending and unique
    assert sel.budgets.tolist() == [expected // num_frames] * num_frames
    assert sel.tokens is not None and sel.tokens.shape == (expected, frames.shape[-1])
    assert sel.tokens.dtype == torch.float32


@pytest.mark.parametrize("num_frames, tokens_per_frame, ratio, min_segment_num", [
    (16, 20, 0.25, 1), (12, 30, 0.35, 1), (24, 12, 0.5, 4), (8, 49, 0.15, 2),
])
def test_count_bounds_with_multi_frame_segments(num_frames, tokens_per_frame, ratio, min_segment_num):
    """T b <= K <= T b + T - #segments, and every frame keeps at least its A ADTS tokens."""
    video = synthetic_video_features(num_frames, tokens_per_frame, 32, scene_cuts=(num_frames // 3,), seed=5)
    frames = video.features
    budget, adts, _ = frame_budget(tokens_per_frame, ratio, 1.25, 0.7)
    segments = segment_lengths(frames.mean(1), 0.9, min_segment_num)
    assert max(segments) > 1  # the premise: some multi-frame segment
    sel = _select(frames, ratio, min_segment_num=min_segment_num)
    count = sel.keep.numel()
    assert num_frames * budget <= count <= num_frames * budget + num_frames - len(segments)
    assert int(sel.budgets.min()) >= adts
    assert sel.budgets.tolist() == torch.bincount(sel.keep // tokens_per_frame, minlength=num_frames).tolist()
    assert torch.all(sel.keep[1:] > sel.keep[:-1]) and sel.tokens.shape == (count, 32)


def test_determinism():
    frames = synthetic_video_features(10, 20, 16, scene_cuts=(4,), seed=2).features
    for selection in ("attn_div", "attn_div_v2"):
        a = _select(frames, 0.3, selection=selection, min_segment_num=2)
        b = _select(frames.clone(), 0.3, selection=selection, min_segment_num=2)
        assert torch.equal(a.keep, b.keep) and torch.equal(a.tokens, b.tokens)


@pytest.mark.parametrize("tokens_per_frame", [1, 2, 3])
@pytest.mark.parametrize("num_frames", [1, 4])
@pytest.mark.parametrize("ratio", [0.2, 0.5, 1.0])
def test_tiny_inputs(num_frames, tokens_per_frame, ratio):
    """T <= min_segment_num (8): every frame is its own segment, K = T * b."""
    frames = torch.randn(num_frames, tokens_per_frame, 5, generator=torch.Generator().manual_seed(3))
    sel = _select(frames, ratio)
    expected = num_frames * _hand_budget(tokens_per_frame, ratio)
    assert sel.keep.numel() == expected and int(sel.budgets.sum()) == expected
    assert sel.tokens.shape == (expected, 5)


@pytest.mark.parametrize("seed", range(6))
def test_single_frame_segments_never_share_a_position(seed):
    """The official code clusters all P tokens of a single-frame segment (ADTS ones too), so a
    centre can land on an ADTS token; here (T = 1) the count is b and positions stay unique."""
    generator = torch.Generator().manual_seed(seed)
    frames = torch.randn(1, 24, 8, generator=generator)
    attention = torch.rand(1, 24, generator=generator)
    for ratio in (0.1, 0.25, 0.5, 0.7):
        sel = _select(frames, ratio, attention, alpha=0.5)
        budget, adts, _ = frame_budget(24, ratio, 1.25, 0.5)
        assert sel.keep.numel() == budget and torch.all(sel.keep[1:] > sel.keep[:-1])
        # the A ADTS tokens are input tokens at their own place
        raw = (sel.tokens == frames[0, sel.keep]).all(-1)
        assert int(raw.sum()) >= adts


def test_bf16_same_selection_as_float32_upcast():
    frames = synthetic_video_features(9, 16, 16, scene_cuts=(4,), seed=4).features.bfloat16()
    attention = _attention(9, 16)
    low = _select(frames, 0.3, attention, min_segment_num=2)
    high = _select(frames.float(), 0.3, attention, min_segment_num=2)
    assert torch.equal(low.keep, high.keep) and torch.equal(low.tokens, high.tokens)
    assert low.tokens.dtype == torch.float32


# ----------------------------------------------------------------------------- known answers


def test_adts_greedy_max_min_by_hand():
    """x0 = e0, x1 = e1, x2 = (e0 + e1)/sqrt2 (cos 0.707 with both), x3 = e2; a = (.1, .4, .2, .3).
    Columns of D * a: second-smallest entries (.0293, .117, .0586, .3) -> first pick 3 (not the top
    attention 1); then max of min-distance: 1 (.4), then 0 (.1 > .0586 of x2, which is near x1)."""
    features = torch.stack([torch.tensor([1.0, 0, 0]), torch.tensor([0, 1.0, 0]),
                            torch.tensor([1.0, 1.0, 0]) / math.sqrt(2), torch.tensor([0, 0, 1.0])])[None]
    weights = torch.tensor([[0.1, 0.4, 0.2, 0.3]])
    assert adts_select(features, weights, 1).tolist() == [[3]]
    assert adts_select(features, weights, 2).tolist() == [[1, 3]]
    assert adts_select(features, weights, 3).tolist() == [[0, 1, 3]]  # attention top-3 would be {1, 2, 3}
    assert adts_select(features, weights, 4).tolist() == [[0, 1, 2, 3]]  # no token twice
    # rel of attn_div_v2: the mean over the segment's frames of <x_j, frame mean>
    segment = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(0))
    by_hand = torch.stack([torch.stack([torch.stack([segment[t, j] @ segment[c].mean(0) for c in range(3)]).mean()
                                        for j in range(5)]) for t in range(3)])
    assert torch.allclose(event_relevance(segment), by_hand, atol=1e-6)


def test_planted_high_attention_distinct_token_is_kept_unchanged():
    """T = 1, P = 16, r = 0.25: b = 5, A = 4. Fifteen near-copies of one vector and one distinct
    token (9) with the highest attention: ADTS keeps token 9 as it is (not merged into the one
    STTM cluster of the other tokens)."""
    generator = torch.Generator().manual_seed(7)
    common = torch.randn(16, generator=generator)
    frames = common + 0.05 * torch.randn(1, 16, 16, generator=generator)
    # distinct (cos ~0.8 with the others, against ~0.999 among them) and still aligned with the frame
    # mean: attn_div_v2's relevance (a raw dot product with the frame mean) stays positive
    frames[0, 9] = common + 3.0 * torch.nn.functional.normalize(torch.randn(16, generator=generator), dim=0)
    attention = torch.full((1, 16), 0.05)
    attention[0, 9] = 0.5
    for selection in ("attn_div", "attn_div_v2"):
        sel = _select(frames, 0.25, attention, selection=selection)
        assert sel.keep.numel() == 5 and 9 in sel.keep.tolist()
        assert torch.equal(sel.tokens[sel.keep.tolist().index(9)], frames[0, 9])


def test_v2_relevance_is_a_raw_dot_product_with_the_frame_means():
    """Token 9 is distinct and most attended but points away from the frame mean (4 e0): v1 keeps
    it; v2's weight a_9 * rel_9 is negative (rel_9 ~ <-2 e0 + 2 e1, 3.6 e0> < 0), so v2 never picks it
    and it ends up inside the one STTM cluster."""
    generator = torch.Generator().manual_seed(3)
    frames = 4.0 * torch.eye(16)[0] + 0.05 * torch.randn(1, 16, 16, generator=generator)
    frames[0, 9] = -2.0 * torch.eye(16)[0] + 2.0 * torch.eye(16)[1]
    attention = torch.full((1, 16), 0.05)
    attention[0, 9] = 0.5
    v1 = _select(frames, 0.25, attention, selection="attn_div")
    v2 = _select(frames, 0.25, attention, selection="attn_div_v2")
    assert v1.keep.numel() == v2.keep.numel() == 5
    assert torch.equal(v1.tokens[v1.keep.tolist().index(9)], frames[0, 9])
    raw = [p for row, p in enumerate(v2.keep.tolist()) if torch.equal(v2.tokens[row], frames[0, p])]
    assert len(raw) == 4 and 9 not in raw


def test_temporal_threshold_decides_the_merge():
    """T = 2, P = 5, r = 0.6 (b = 4, A = 3, S = 1), frame 1 = frame 0 + 0.6 u: token cosine
    1/sqrt(1.36) = 0.857. One segment (segment_threshold -1). At 0.8 the 2 free tokens merge into
    frame 0 (retained 8 = b L; N = 2 = S L: no clustering); at 0.9 nothing merges: N = 4 > 2, one
    cluster per frame."""
    frames, attention = _planted(2, 5, 7)
    frames[1, :, 5] += 0.6
    merged = _select(frames, 0.6, attention, min_segment_num=1, segment_threshold=-1.0)
    assert merged.budgets.tolist() == [5, 3]
    tokens = dict(zip(merged.keep.tolist(), merged.tokens))
    for i in (0, 2):
        assert torch.allclose(tokens[i], frames[:, i].mean(0), atol=1e-6)
    apart = _select(frames, 0.6, attention, min_segment_num=1, segment_threshold=-1.0, temporal_threshold=0.9)
    assert apart.budgets.tolist() == [4, 4]


def test_planted_duplicate_frames_merge_into_the_earliest_frame():
    """T = 3 near-identical frames, P = 6, r = 0.5: b = 4, A = 3 (tokens 1, 3, 4), S = 1. The free
    tokens 0, 2, 5 of frames 1 and 2 merge into their copies of the previous frame (cos ~1 > 0.8):
    3 trees rooted in frame 0 (retained 9 + 3 = b L = 12: no lower-bound adjustment; N = 3 = S L:
    no clustering). Each root is the mean of its three members, at its frame-0 position."""
    frames, attention = _planted(3, 6, 8)
    sel = _select(frames, 0.5, attention, min_segment_num=1)
    assert sel.keep.tolist() == [0, 1, 2, 3, 4, 5, 7, 9, 10, 13, 15, 16]
    assert sel.budgets.tolist() == [6, 3, 3]
    tokens = dict(zip(sel.keep.tolist(), sel.tokens))
    for i in (0, 2, 5):
        assert torch.allclose(tokens[i], (frames[0, i] + frames[1, i] + frames[2, i]) / 3, atol=1e-6)
    for t in range(3):
        for i in (1, 3, 4):
            assert torch.equal(tokens[t * 6 + i], frames[t, i])  # ADTS tokens unchanged


def test_lower_bound_keeps_the_least_similar_tokens_as_roots():
    """T = 4, P = 6, r = 0.5 (b = 4, A = 3, S = 1). Token 0 of frames 2-3 gets +0.5 e6 (cos 0.894 with
    frame 1), token 5 of frame 3 gets +0.45 e7 (cos 0.912 with frame 2); the other 7 free
    similarities are ~1. All 9 exceed 0.8, which would leave 12 + 3 = 15 < b L = 16 tokens, so only
    those above the (24 - 16) = 8th largest similarity (0.912) merge: 7 merges, roots frame 0 {0, 2, 5},
    frame 2 {0}, frame 3 {5}. N = 5 > S L = 4: clusters ceil(3*4/5) = 3, ceil(4/5) = 1, ceil(4/5) = 1
    (all roots stay; the ceil surplus makes K = 17 = T b + 1)."""
    frames, attention = _planted(4, 6, 8)
    frames[2:, 0, 6] += 0.5
    frames[3, 5, 7] += 0.45
    sel = _select(frames, 0.5, attention, min_segment_num=1)
    assert sel.keep.tolist() == [0, 1, 2, 3, 4, 5, 7, 9, 10, 12, 13, 15, 16, 19, 21, 22, 23]
    assert sel.budgets.tolist() == [6, 3, 4, 4]
    tokens = dict(zip(sel.keep.tolist(), sel.tokens))
    assert torch.allclose(tokens[0], frames[:2, 0].mean(0), atol=1e-6)
    assert torch.allclose(tokens[2], frames[:, 2].mean(0), atol=1e-6)
    assert torch.allclose(tokens[5], frames[:3, 5].mean(0), atol=1e-6)
    assert torch.allclose(tokens[12], frames[2:, 0].mean(0), atol=1e-6)  # a tree rooted in frame 2
    assert torch.equal(tokens[23], frames[3, 5])


def test_spatial_clustering_merges_roots_down_to_the_sttm_budget():
    """T = 2, P = 6, r = 0.5 (b = 4, A = 3, S = 1), frame 1 unrelated to frame 0 (cos 0 < 0.8) but in
    one segment: 6 roots, S L = 2 -> ceil(3*2/6) = 1 cluster per frame, the mean of its 3 roots."""
    frames, attention = _planted(2, 6, 16)
    frames[1, [0, 2, 5]] = torch.eye(16)[[8, 9, 10]] + 0.01 * frames[1, [0, 2, 5]]
    frames[1, :, 11] += 1.0  # keeps the frame means apart from the tokens' own directions
    sel = _select(frames, 0.5, attention, min_segment_num=1, segment_threshold=-1.0)
    assert sel.budgets.tolist() == [4, 4] and sel.keep.numel() == 8
    for t in range(2):
        merged = [p for p in sel.keep.tolist() if p // 6 == t and p % 6 in (0, 2, 5)]
        assert len(merged) == 1
        row = sel.keep.tolist().index(merged[0])
        assert torch.allclose(sel.tokens[row], frames[t, [0, 2, 5]].mean(0), atol=1e-6)


def test_planted_scene_cut_is_found_and_not_merged_across():
    """T = 4, P = 5, r = 0.6 (b = 4, A = 3, S = 1); frames 2-3 get +0.6 u: frame-mean cosine
    1/sqrt(1 + 5 * 0.36) = 0.60 < 0.9 (a cut), token cosine 1/sqrt(1.36) = 0.86 > 0.8 (would merge
    without the cut). Two segments [2, 2]: trees rooted in frames 0 and 2, each the mean of 2."""
    frames, attention = _planted(4, 5, 7)
    frames[2:, :, 5] += 0.6
    assert segment_lengths(frames.mean(1), 0.9, 1) == [2, 2]
    sel = _select(frames, 0.6, attention, min_segment_num=1)
    assert sel.keep.tolist() == [0, 1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 14, 16, 18, 19]
    assert sel.budgets.tolist() == [5, 3, 5, 3]
    tokens = dict(zip(sel.keep.tolist(), sel.tokens))
    for t in (0, 2):
        for i in (0, 2):
            assert torch.allclose(tokens[t * 5 + i], frames[t:t + 2, i].mean(0), atol=1e-6)


def test_segmentation_by_hand():
    """Unit frame features at angles with steps (0.1, 0.2, 1.0, 0.3, 0.05): cosines (.995, .980,
    .540, .955, .9988): one cut after frame 2; extra cuts at the lowest non-cut similarities."""
    angles = torch.tensor([0.0, 0.1, 0.3, 1.3, 1.6, 1.65])
    features = torch.stack([angles.cos(), angles.sin()], dim=1) * 3.0
    assert segment_lengths(features, 0.9, 1) == [3, 3]
    assert segment_lengths(features, 0.9, 2) == [3, 3]
    assert segment_lengths(features, 0.9, 3) == [3, 1, 2]  # + the .955 transition
    assert segment_lengths(features, 0.9, 4) == [2, 1, 1, 2]  # + .980
    assert segment_lengths(features, 0.9, 20) == [1] * 6  # never an empty segment
    assert segment_lengths(features, 0.99, 1) == [2, 1, 1, 2]  # .980, .540, .955 are cuts
    assert segment_lengths(features[:1], 0.9, 8) == [1]
    # a planted scene cut in synthetic features
    video = synthetic_video_features(12, 16, 32, scene_cuts=(5,), seed=0)
    assert segment_lengths(video.features.mean(1), 0.9, 1) == [5, 7]


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("params, name", [
    ({"alpha": 1.5}, "alpha"), ({"alpha": -0.1}, "alpha"), ({"expansion": 0}, "expansion"),
    ({"segment_threshold": 2.0}, "segment_threshold"), ({"min_segment_num": 0}, "min_segment_num"),
    ({"min_segment_num": 2.5}, "min_segment_num"), ({"temporal_threshold": 1.5}, "temporal_threshold"),
    ({"selection": "attn"}, "selection"),
])
def test_bad_parameters_are_named(params, name):
    frames = torch.randn(3, 8, 4)
    with pytest.raises(ValueError, match=name):
        _select(frames, 0.5, **params)


def test_missing_or_misshaped_vision_attention_is_named():
    frames = torch.randn(3, 8, 4)
    with pytest.raises(ValueError, match="vision_attention"):
        vcast.select(frames, 0.5, method="flashvid_merge")
    with pytest.raises(ValueError, match="vision_attention"):
        _select(frames, 0.5, torch.rand(3, 9))
    with pytest.raises(ValueError, match="vision_attention"):
        _select(frames, 0.5, torch.ones(3, 8, dtype=torch.long))


# ----------------------------------------------------------------------------- the in-LLM planner


def _llm(family: str, layers: int) -> LLMInfo:
    """A registered family's language model, or one of a family vcast has no facts for."""
    try:
        return LLMInfo.of(get_family(family), layers)
    except ValueError:
        return LLMInfo(family, layers)


def _plan(family: str, layers: int, ratio: float = 0.25, **params):
    plan = registry.get_method("flashvid")(ratio, _llm(family, layers), **params)
    plan.check(_llm(family, layers))
    return plan


def _stage_inputs(visual_scores: list[float], text_scores: float = 5.0) -> StageInputs:
    """A row of 2 text columns, the video columns, 2 text columns; the last token's head-mean
    attention is ``visual_scores`` on the video columns (the two heads differ; ties stay exact)."""
    count = len(visual_scores)
    width = count + 4
    mean = torch.full((width,), text_scores)
    mean[2:2 + count] = torch.tensor(visual_scores)
    # head 0 holds twice the mean on even columns, head 1 on odd ones: the head-mean is exact
    even = (torch.arange(width) % 2 == 0).float()
    attention = torch.stack([2 * mean * even, 2 * mean * (1 - even)])[:, None, :]  # [H=2, R=1, S]
    visual = torch.arange(2, 2 + count)
    return StageInputs(stage=0, layer=1, num_layers=2, hidden=torch.zeros(width, 8), visual=visual,
                       frames=torch.arange(count) // 5, patches=torch.arange(count) % 5,
                       videos=torch.zeros(count, dtype=torch.long), rows=torch.tensor([width - 1]),
                       attention=attention, entry_tokens=count, embeddings=torch.zeros(width, 8),
                       entry_visual=visual, state={})


SCORES = [0.05, 0.3, 0.01, 0.2, 0.2, 0.02, 0.01, 0.25, 0.03, 0.04]


@pytest.mark.parametrize("family, layers, layer, retention, min_segment_num, selection", [
    ("llava_onevision", 28, 20, 0.3, 8, "attn_div_v2"),
    ("qwen3_vl", 36, 28, 0.1, 4, "attn_div"),
    ("llava_onevision", 2, 1, 0.3, 8, "attn_div_v2"),   # round(20 * 2 / 28) = 1
    ("qwen3_vl", 3, 2, 0.1, 4, "attn_div"),             # round(28 * 3 / 36) = 2
    ("qwen3_vl", 28, 22, 0.1, 4, "attn_div"),           # round(28 * 28 / 36) = 22
])
def test_plan_family_defaults(family, layers, layer, retention, min_segment_num, selection):
    plan = _plan(family, layers, 0.3)
    assert len(plan.stages) == 1
    stage = plan.stages[0]
    assert (stage.layer, stage.queries, stage.score_layer) == (layer, "last", layer - 1)
    assert plan.positions == "original" and plan.scores == "rows"
    assert (plan.pre_method, plan.pre_ratio) == ("flashvid_merge", 0.3)
    assert plan.pre_params == {"selection": selection, "alpha": 0.7, "expansion": 1.25, "segment_threshold": 0.9,
                               "min_segment_num": min_segment_num, "temporal_threshold": 0.8}
    scores = SCORES * 3  # N = 30
    keep = stage.choose(_stage_inputs(scores)).keep
    assert keep.numel() == math.ceil(30 * retention - 1e-9)  # 9 (LLaVA) / 3 (Qwen)
    expected = torch.sort(torch.tensor(scores), descending=True, stable=True).indices[: keep.numel()]
    assert keep.tolist() == sorted(expected.tolist())


def test_plan_overrides_and_pre_params_run():
    plan = _plan("qwen3_vl", 36, 0.25, layer=5, llm_retention=0.5, min_segment_num=2, selection="attn_div_v2",
                 alpha=0.5, expansion=1.0, segment_threshold=0.8, temporal_threshold=0.7, scores="eager")
    assert plan.stages[0].layer == 5 and plan.scores == "eager"
    assert plan.pre_params == {"selection": "attn_div_v2", "alpha": 0.5, "expansion": 1.0, "segment_threshold": 0.8,
                               "min_segment_num": 2, "temporal_threshold": 0.7}
    assert plan.stages[0].choose(_stage_inputs(SCORES)).keep.numel() == 5
    frames = torch.randn(4, 16, 8, generator=torch.Generator().manual_seed(0))
    sel = vcast.select(frames, plan.pre_ratio, method=plan.pre_method, vision_attention=_attention(4, 16),
                       **plan.pre_params)
    assert sel.keep.numel() >= 4 * 4  # b = ceil(16 * 0.25 * 1.0) = 4
    # an unknown family works when every family default is given
    other = _plan("Other", 10, layer=3, llm_retention=0.2, min_segment_num=4, selection="attn_div")
    assert other.stages[0].layer == 3


def test_stage_keeps_ceil_of_share_with_ties_to_lower_index():
    """N = 10: rho = 0.21 keeps ceil(2.1) = 3 (FastV's round would keep 2); rho = 0.3 keeps 3. Top
    scores .3 (1), .25 (7), then the tie .2 (3, 4) goes to 3. The text columns' larger attention is
    ignored. N = 100, rho = 0.07 keeps 7 (the official float product 7.000000000000001 gives 8)."""
    plan = _plan("llava_onevision", 28, llm_retention=0.21)
    assert plan.stages[0].choose(_stage_inputs(SCORES)).keep.tolist() == [1, 3, 7]
    plan = _plan("llava_onevision", 28)
    choice = plan.stages[0].choose(_stage_inputs(SCORES))
    assert choice.keep.tolist() == [1, 3, 7] and choice.tokens is None
    plan = _plan("llava_onevision", 28, llm_retention=1.0)
    assert plan.stages[0].choose(_stage_inputs(SCORES)).keep.tolist() == list(range(10))
    plan = _plan("llava_onevision", 28, llm_retention=0.07)
    assert plan.stages[0].choose(_stage_inputs(SCORES * 10)).keep.tolist() == [1, 11, 21, 31, 41, 51, 61]


@pytest.mark.parametrize("params, name", [
    ({"layer": 0}, "layer"), ({"layer": 28}, "layer"), ({"llm_retention": 0.0}, "llm_retention"),
    ({"llm_retention": 1.5}, "llm_retention"), ({"scores": "full"}, "scores"),
    ({"selection": "div"}, "selection"), ({"min_segment_num": 0}, "min_segment_num"),
    ({"alpha": 2.0}, "alpha"),
])
def test_plan_bad_parameters_are_named(params, name):
    with pytest.raises(ValueError, match=name):
        registry.get_method("flashvid")(0.25, LLMInfo.of(get_family("llava_onevision"), 28), **params)


def test_plan_unknown_family_needs_every_default():
    with pytest.raises(ValueError, match="family"):
        registry.get_method("flashvid")(0.25, LLMInfo("Other", 10), layer=3)


# ----------------------------------------------------------------------------- variant="official"

def _official(frames: torch.Tensor, ratio: float, attention: torch.Tensor, **params):
    return vcast.select(frames, ratio, method="flashvid_merge", vision_attention=attention, variant="official",
                        **params)


def _bf16(value: float) -> float:
    """``value`` rounded to bf16 (round half to even), as a Python float."""
    return torch.tensor(value, dtype=torch.float32).bfloat16().item()


def _chain_video(scales: list[float], dtype: torch.dtype = torch.float32):
    """T = len(scales) frames of P = 5 tokens ``x_{t,i} = scales[t] * e_i`` (D = 5): every
    non-ADTS token's parent is the same token of the previous frame (cosine 1, others 0), so each
    forms a chain over all frames; the attention makes 1 and 3 the ADTS picks (A = 2)."""
    frames = torch.stack([scale * torch.eye(5) for scale in scales]).to(dtype)
    attention = torch.tensor([0.01, 1.0, 0.01, 0.9, 0.01]).expand(len(scales), -1).clone()
    return frames, attention


# T = 3, P = 5, r = 0.6, expansion = 1: b = ceil(3.0) = 3, A = ceil(1.5) = 2, S = 1; the lower bound
# b * L = 9 = P + A (L - 1) is met, and N = 3 roots = S * L: no clustering. One segment.
CHAIN = {"expansion": 1.0, "alpha": 0.5, "min_segment_num": 1, "selection": "attn_div"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_official_three_frame_chain_root_is_sum_over_two(dtype):
    """Chain x0 <- x1 <- x2 (scales 1, 2, 3): the release adds x1 + x2 into x0 but counts 1 per
    direct child, so the root is (1 + 2 + 3) / 2 = 3 = 1.5x the mean 2; paper keeps the mean."""
    frames, attention = _chain_video([1.0, 2.0, 3.0], dtype)
    official = _official(frames, 0.6, attention, **CHAIN)
    paper = vcast.select(frames, 0.6, method="flashvid_merge", vision_attention=attention, **CHAIN)
    expected_keep = [0, 1, 2, 3, 4, 6, 8, 11, 13]  # frame 0 all (roots 0, 2, 4 + ADTS 1, 3), then ADTS 1, 3
    assert official.keep.tolist() == expected_keep and paper.keep.tolist() == expected_keep
    assert official.tokens.dtype == dtype and paper.tokens.dtype == torch.float32
    roots = [0, 2, 4]
    eye = torch.eye(5)
    assert torch.equal(official.tokens[roots].float(), 3.0 * eye[roots])
    assert torch.equal(paper.tokens[roots], 2.0 * eye[roots])
    # ADTS tokens are the input's own in both variants
    assert torch.equal(official.tokens[[1, 3, 5, 6, 7, 8]].float(), paper.tokens[[1, 3, 5, 6, 7, 8]])


def test_official_trees_two_children_and_a_grandchild_by_hand():
    """Parent p = (1, 0) in frame 0; frame 1: c1 = (1, .25), c2 = (1, -.25) both point to p; frame 2:
    g = (1, .5) points to c1. The release: c1 holds c1 + g (count 2), p gets (c1 + g) + c2 with
    count 1 + 2 children = 3, so the root is (4, .5) / 3; the tree mean is (4, .5) / 4. Without g
    (two leaf children) both give the mean (3, 0) / 3."""
    from baselines.flashvid_merge.official import official_trees
    from baselines.flashvid_merge.paper import temporal_trees

    far = torch.tensor([-1.0, 0.0])  # a second token per frame, opposite: never a parent
    features = torch.stack([torch.stack([torch.tensor([1.0, 0.0]), far]),
                            torch.stack([torch.tensor([1.0, 0.25]), torch.tensor([1.0, -0.25])]),
                            torch.stack([torch.tensor([1.0, 0.5]), far])])  # [L=3, P=2, D=2]
    free = torch.ones(3, 2, dtype=torch.bool)
    # frame 2's second token (= far) points to c2 with cosine -0.97: no merge
    work = features.clone()
    roots = official_trees(work, free, 0.8, lower_bound=0)
    assert roots.tolist() == [[True, True], [False, False], [False, True]]
    assert torch.allclose(work[0, 0], torch.tensor([4.0, 0.5]) / 3)
    paper_roots, means = temporal_trees(features, free, 0.8, 0)
    assert torch.equal(paper_roots, roots) and torch.allclose(means[0, 0], torch.tensor([4.0, 0.5]) / 4)
    two = features[:2].clone()
    roots = official_trees(two, free[:2], 0.8, lower_bound=0)
    assert roots.tolist() == [[True, True], [False, False]]
    assert torch.allclose(two[0, 0], torch.tensor([1.0, 0.0])) and torch.allclose(
        temporal_trees(features[:2], free[:2], 0.8, 0)[1][0, 0], torch.tensor([1.0, 0.0]))


def test_official_bf16_tree_sum_rounds_in_bf16():
    """Chain scales u, 1, u with u = 1 + 2^-7 (exact in bf16). bf16, step by step as the release:
    1 + u = 2.0078125 is a tie between 2.0 and 2.015625 -> 2.0 (even); u + 2.0 = 3.0078125 is a
    tie between 3.0 and 3.015625 -> 3.0; / 2 -> 1.5. float32: 3.015625 / 2 = 1.5078125 (also what
    a float32 accumulation rounded once to bf16 would give). paper: the float32 mean 3.015625 / 3
    for both input dtypes."""
    u = 1.0 + 2.0**-7
    assert _bf16(1.0 + u) == 2.0 and _bf16(u + 2.0) == 3.0 and _bf16((2 * u + 1.0) / 2) == 1.5078125
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        frames, attention = _chain_video([u, 1.0, u], dtype)
        results[dtype] = (_official(frames, 0.6, attention, **CHAIN),
                          vcast.select(frames, 0.6, method="flashvid_merge", vision_attention=attention, **CHAIN))
    low, high = results[torch.bfloat16][0], results[torch.float32][0]
    assert low.tokens[0, 0].item() == _bf16(u + _bf16(1.0 + u)) / 2 == 1.5
    assert high.tokens[0, 0].item() == 1.5078125
    paper_low, paper_high = results[torch.bfloat16][1], results[torch.float32][1]
    assert torch.equal(paper_low.tokens, paper_high.tokens)
    assert paper_low.tokens[0, 0].item() == pytest.approx((2 * u + 1.0) / 3, abs=1e-7)


def test_official_bf16_threshold_is_compared_in_bf16():
    """Two frames, token 0 = (1, 0) then (0.80078125, 0.59765625) (bf16 values, cosine 0.8014 in
    float32). float32: 0.8014 > 0.8 merges. bf16: the norm rounds to 1, the cosine is 0.80078125,
    and the release compares it with 0.8 rounded to bf16 (0.80078125): no merge. paper merges for
    both dtypes. P = 2 (the other token, 1 in both frames, is the ADTS pick), b = 2, A = 1, S = 1."""
    from baselines.flashvid_merge.official import official_trees
    from baselines.flashvid_merge.paper import temporal_trees

    features = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.80078125, 0.59765625], [0.0, 1.0]]])
    free = torch.tensor([[True, False], [True, False]])
    assert _bf16(0.8) == 0.80078125
    merged_high = official_trees(features.clone(), free, 0.8, lower_bound=0)
    merged_low = official_trees(features.bfloat16(), free, 0.8, lower_bound=0)
    assert merged_high.tolist() == [[True, False], [False, False]]  # token 0 of frame 1 merged
    assert merged_low.tolist() == [[True, False], [True, False]]    # kept as its own root
    for dtype in (torch.float32, torch.bfloat16):
        roots, _ = temporal_trees(features.to(dtype).float(), free, 0.8, 0)
        assert roots.tolist() == [[True, False], [False, False]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_official_single_frame_cluster_centre_on_an_adts_token(dtype):
    """T = 1, P = 4, D = 2, r = 1, expansion = 1, alpha = 0.01: b = 4, A = 1, S = 3. x0 = (1, -1/8),
    x1 = (1, 0), x2 = (1, 1/4), x3 = (-1, 0), attention (.001, 1, .001, .001): ADTS picks x1 (its
    nearest-neighbour cosine distance .0077 x 1e6 beats 1.97 x 1e3 of x3). The release clusters all
    4 tokens into ceil(4 * 3/4) = 3 (k = 3): densities 0.974, 0.987, 0.967, ~0.26, so x1 is the
    densest (score 1.43 x .987), then x3 (1.41 x .26), x2 (.177 x .967); x0 joins x1. The centre x1
    takes position 1 a second time: the later output (the cluster mean (1, -1/16)) is kept, so K = 3
    (the release's sequence holds 4). paper clusters only the non-ADTS tokens: all 4 kept as they are."""
    frames = torch.tensor([[[1.0, -0.125], [1.0, 0.0], [1.0, 0.25], [-1.0, 0.0]]], dtype=dtype)
    attention = torch.tensor([[0.001, 1.0, 0.001, 0.001]])
    params = {"expansion": 1.0, "alpha": 0.01, "selection": "attn_div"}
    official = _official(frames, 1.0, attention, **params)
    assert official.keep.tolist() == [1, 2, 3]
    assert official.tokens.float().tolist() == [[1.0, -0.0625], [1.0, 0.25], [-1.0, 0.0]]
    paper = vcast.select(frames, 1.0, method="flashvid_merge", vision_attention=attention, **params)
    assert paper.keep.tolist() == [0, 1, 2, 3] and torch.equal(paper.tokens, frames[0].float())


def test_official_budgets_use_float_ceil():
    from baselines.flashvid.official import official_llm_count
    from baselines.flashvid_merge.official import official_budget

    assert official_budget(100, 0.28, 1.25, 0.7) == (36, 26, 10)  # 35.00000000000001 -> 36
    assert frame_budget(100, 0.28, 1.25, 0.7) == (35, 25, 10)     # paper: the decimal 35
    assert official_budget(196, 0.25, 1.25, 0.7) == (62, 44, 18)  # 61.25 -> 62, 43.4 -> 44
    assert official_budget(16, 0.25, 1.25, 0.7) == (5, 4, 1)      # exactly 5.0; 3.5 -> 4
    assert official_budget(5, 0.6, 1.0, 0.5) == (3, 2, 1)         # exactly 3.0; 1.5 -> 2
    assert official_budget(10, 0.24, 1.25, 0.7) == (3, 3, 0)      # exactly 3.0; 2.1 -> 3
    assert official_llm_count(100, 0.07) == 8 and ceil_share(100, 0.07) == 7  # 7.000000000000001
    assert official_llm_count(30, 0.3) == 9 and official_llm_count(30, 0.1) == 3
    assert official_llm_count(31, 0.1) == 4 and official_llm_count(1, 0.1) == 1


@pytest.mark.parametrize("tokens_per_frame, ratio, official_budget, paper_budget", [
    (20, 0.2, 5, 5),      # 20 * 0.2 * 1.25 = 5.0 exactly: 5, not 6
    (100, 0.28, 36, 35),  # the release's float 35.00000000000001 -> 36; paper's decimal 35
])
def test_official_count_at_the_exact_budget_boundary(tokens_per_frame, ratio, official_budget, paper_budget):
    """One segment of L = 2 nearly static frames (no single-frame segment, so no index collision):
    K lies in [b L, b L + L - 1] with the release's b."""
    base = torch.randn(tokens_per_frame, 16, generator=torch.Generator().manual_seed(0))
    frames = base + 0.05 * torch.randn(2, tokens_per_frame, 16, generator=torch.Generator().manual_seed(1))
    attention = _attention(2, tokens_per_frame)
    official = _official(frames, ratio, attention, min_segment_num=1)
    paper = _select(frames, ratio, attention, min_segment_num=1)
    assert 2 * official_budget <= official.keep.numel() <= 2 * official_budget + 1
    assert 2 * paper_budget <= paper.keep.numel() <= 2 * paper_budget + 1


def test_official_seeded_noise_deterministic_and_global_rng_untouched():
    """Duplicated tokens tie in density: the seeded noise decides, the global RNG is not used."""
    frames = torch.randint(-2, 3, (6, 16, 8), generator=torch.Generator().manual_seed(0)).float()
    frames[:, 1] = frames[:, 0]
    attention = _attention(6, 16)
    state = torch.get_rng_state()
    runs = {seed: _official(frames, 0.3, attention, seed=seed, min_segment_num=6) for seed in range(6)}
    assert torch.equal(torch.get_rng_state(), state)
    again = _official(frames, 0.3, attention, seed=0, min_segment_num=6)
    assert torch.equal(again.keep, runs[0].keep) and torch.equal(again.tokens, runs[0].tokens)
    assert any(not torch.equal(runs[seed].keep, runs[0].keep) for seed in range(1, 6))


def test_official_paper_unchanged_and_variants_differ_on_a_multi_frame_video():
    frames = synthetic_video_features(8, 16, 16, scene_cuts=(4,), seed=4).features.bfloat16()
    attention = _attention(8, 16)
    paper = _select(frames, 0.3, attention, min_segment_num=2)
    assert torch.equal(paper.keep, _select(frames, 0.3, attention, min_segment_num=2, variant="paper").keep)
    official = _official(frames, 0.3, attention, min_segment_num=2)
    assert official.tokens.dtype == torch.bfloat16
    assert not (torch.equal(official.keep, paper.keep) and torch.equal(official.tokens.float(), paper.tokens))


@pytest.mark.parametrize("params, match", [
    ({"temporal_threshold": 1.0}, "temporal_threshold"),
    ({"expansion": 1.25}, "frame budget"),  # r = 0.8: b = P with a merge to undo
])
def test_official_refuses_where_the_release_fails(params, match):
    frames = 1.0 + 0.01 * torch.randn(4, 10, 8, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=match):
        _official(frames, 0.8, _attention(4, 10), min_segment_num=1, **params)
    with pytest.raises(ValueError, match="P >= 2"):
        _official(torch.ones(3, 1, 4), 0.5, _attention(3, 1))


def test_unknown_variant_is_named():
    frames = torch.randn(2, 8, 4)
    with pytest.raises(ValueError, match="vidcom2_qwen"):
        _select(frames, 0.25, variant="vidcom2_qwen")
    with pytest.raises(ValueError, match="bogus"):
        _select(frames, 0.25, variant="bogus")
    with pytest.raises(ValueError, match="bogus"):
        registry.get_method("flashvid")(0.25, LLMInfo.of(get_family("qwen3_vl"), 36), variant="bogus")


@pytest.mark.parametrize("family, layers, scale, retention", [
    ("llava_onevision", 28, "multiply", 0.3), ("qwen3_vl", 36, "divide", 0.1),
])
def test_official_plan(family, layers, scale, retention):
    plan = _plan(family, layers, 0.25, variant="official", seed=3)
    assert (plan.score_dtype, plan.score_scale) == ("model", scale)
    assert plan.pre_params["variant"] == "official" and plan.pre_params["seed"] == 3
    paper = _plan(family, layers, 0.25)
    assert paper.score_dtype == "float32" and "variant" not in paper.pre_params
    assert plan.stages[0].layer == paper.stages[0].layer
    # count: math.ceil(N * rho) on floats, chosen by topk then sorted
    keep = plan.stages[0].choose(_stage_inputs(SCORES * 10)).keep  # N = 100
    assert keep.numel() == math.ceil(100 * retention)
    scores = torch.tensor(SCORES * 10)
    assert sorted(scores[keep].tolist()) == sorted(scores.tolist())[-keep.numel():]  # the top values
    assert torch.all(keep[1:] > keep[:-1])
    rho7 = _plan(family, layers, 0.25, variant="official", llm_retention=0.07)
    assert rho7.stages[0].choose(_stage_inputs(SCORES * 10)).keep.numel() == 8  # 7.000000000000001 -> 8
