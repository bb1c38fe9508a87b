"""FlashVID (baselines/flashvid.py): the vision-side compressor ``flashvid_merge`` and the in-LLM
planner ``flashvid``.

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
from baselines.flashvid import (
    adts_select,
    ceil_share,
    event_relevance,
    frame_budget,
    segment_lengths,
)
from vcast import registry
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
        "min_segment_num": 8, "temporal_threshold": 0.8,
    }
    assert vcast.method_params("flashvid") == {
        "layer": None, "llm_retention": None, "min_segment_num": None, "selection": None, "alpha": 0.7,
        "expansion": 1.25, "segment_threshold": 0.9, "temporal_threshold": 0.8, "scores": "rows",
    }


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


def _plan(family: str, layers: int, ratio: float = 0.25, **params):
    plan = registry.get_method("flashvid")(ratio, LLMInfo(family, layers), **params)
    plan.check(LLMInfo(family, layers))
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
    ("LLaVA-OneVision", 28, 20, 0.3, 8, "attn_div_v2"),
    ("Qwen3-VL", 36, 28, 0.1, 4, "attn_div"),
    ("LLaVA-OneVision", 2, 1, 0.3, 8, "attn_div_v2"),   # round(20 * 2 / 28) = 1
    ("Qwen3-VL", 3, 2, 0.1, 4, "attn_div"),             # round(28 * 3 / 36) = 2
    ("Qwen3-VL", 28, 22, 0.1, 4, "attn_div"),           # round(28 * 28 / 36) = 22
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
    plan = _plan("Qwen3-VL", 36, 0.25, layer=5, llm_retention=0.5, min_segment_num=2, selection="attn_div_v2",
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
    plan = _plan("LLaVA-OneVision", 28, llm_retention=0.21)
    assert plan.stages[0].choose(_stage_inputs(SCORES)).keep.tolist() == [1, 3, 7]
    plan = _plan("LLaVA-OneVision", 28)
    choice = plan.stages[0].choose(_stage_inputs(SCORES))
    assert choice.keep.tolist() == [1, 3, 7] and choice.tokens is None
    plan = _plan("LLaVA-OneVision", 28, llm_retention=1.0)
    assert plan.stages[0].choose(_stage_inputs(SCORES)).keep.tolist() == list(range(10))
    plan = _plan("LLaVA-OneVision", 28, llm_retention=0.07)
    assert plan.stages[0].choose(_stage_inputs(SCORES * 10)).keep.tolist() == [1, 11, 21, 31, 41, 51, 61]


@pytest.mark.parametrize("params, name", [
    ({"layer": 0}, "layer"), ({"layer": 28}, "layer"), ({"llm_retention": 0.0}, "llm_retention"),
    ({"llm_retention": 1.5}, "llm_retention"), ({"scores": "full"}, "scores"),
    ({"selection": "div"}, "selection"), ({"min_segment_num": 0}, "min_segment_num"),
    ({"alpha": 2.0}, "alpha"),
])
def test_plan_bad_parameters_are_named(params, name):
    with pytest.raises(ValueError, match=name):
        registry.get_method("flashvid")(0.25, LLMInfo("LLaVA-OneVision", 28), **params)


def test_plan_unknown_family_needs_every_default():
    with pytest.raises(ValueError, match="family"):
        registry.get_method("flashvid")(0.25, LLMInfo("Other", 10), layer=3)
