"""FastVID baseline (baselines/fastvid.py) and its DySeg segmentation (baselines/dyseg.py)."""

from __future__ import annotations

import math

import pytest
import torch

import vcast
from baselines.dyseg import (
    dyseg,
    segment_cuts,
    segment_lengths,
    transition_similarities,
)
from baselines.fastvid import merge_into_anchors, segment_plan
from vcast.synthetic_features import synthetic_video_features


def _attention(num_frames: int, tokens_per_frame: int, seed: int = 1) -> torch.Tensor:
    return torch.rand(num_frames, tokens_per_frame, generator=torch.Generator().manual_seed(seed))


def _video(num_frames: int, tokens_per_frame: int, dim: int = 16, seed: int = 0, **kwargs) -> torch.Tensor:
    return synthetic_video_features(num_frames, tokens_per_frame, dim, seed=seed, **kwargs).features


def _select(frames: torch.Tensor, ratio: float, attention: torch.Tensor | None = None, **params):
    if attention is None:
        attention = _attention(frames.shape[0], frames.shape[1])
    return vcast.select(frames, ratio, method="fastvid", vision_attention=attention, **params)


# ----------------------------------------------------------------------------- registration, counts


def test_registered_with_official_defaults():
    assert "fastvid" in vcast.available_methods()
    assert vcast.registry.method_inputs("fastvid") == ("vision_attention",)
    assert vcast.method_params("fastvid") == {
        "num_segments": 8, "segment_threshold": 0.9, "context_ratio": 0.4,
        "anchor_period": 4, "beta": 0.6, "dpc_k": 4,
    }


@pytest.mark.parametrize("num_frames, tokens_per_frame, ratio, expected", [
    (8, 16, 0.25, 32), (5, 49, 0.15, 36), (12, 30, 0.35, 126), (3, 7, 0.5, 10),
    (24, 20, 0.1, 48), (16, 9, 0.9, 129), (6, 4, 1.0, 24),
])
def test_exact_kept_count(num_frames, tokens_per_frame, ratio, expected):
    assert expected == math.floor(round(ratio * num_frames * tokens_per_frame, 9))
    frames = _video(num_frames, tokens_per_frame, scene_cuts=(num_frames // 2,))
    sel = _select(frames, ratio)
    assert sel.keep.numel() == expected and int(sel.budgets.sum()) == expected
    assert torch.all(sel.keep[1:] > sel.keep[:-1])  # ascending and unique
    assert sel.budgets.tolist() == torch.bincount(sel.keep // tokens_per_frame, minlength=num_frames).tolist()
    assert sel.tokens is not None and sel.tokens.shape == (expected, frames.shape[-1])
    assert sel.tokens.dtype == torch.float32


def test_ratio_one_keeps_every_position():
    frames = _video(9, 6)
    sel = _select(frames, 1.0)
    assert sel.keep.tolist() == list(range(54))
    assert sel.budgets.tolist() == [6] * 9


@pytest.mark.parametrize("tokens_per_frame", [1, 2, 3])
@pytest.mark.parametrize("num_frames", [1, 4])
@pytest.mark.parametrize("ratio", [0.2, 0.5, 1.0])
def test_tiny_inputs(num_frames, tokens_per_frame, ratio):
    frames = torch.randn(num_frames, tokens_per_frame, 5, generator=torch.Generator().manual_seed(3))
    sel = _select(frames, ratio)
    expected = math.floor(round(ratio * num_frames * tokens_per_frame, 9))
    assert sel.keep.numel() == expected and int(sel.budgets.sum()) == expected
    assert sel.tokens.shape == (expected, 5)


def test_determinism():
    frames = _video(16, 25, scene_cuts=(5, 11))
    first, second = _select(frames, 0.3), _select(frames, 0.3)
    assert torch.equal(first.keep, second.keep)
    assert torch.equal(first.tokens, second.tokens)


def test_bf16_matches_float32_upcast():
    frames = _video(12, 25, dim=32, scene_cuts=(6,), dtype=torch.bfloat16)
    attention = _attention(12, 25)
    low = _select(frames, 0.25, attention)
    high = _select(frames.float(), 0.25, attention)
    assert low.keep.numel() == 75
    assert torch.equal(low.keep, high.keep)
    assert torch.allclose(low.tokens, high.tokens, atol=1e-5)
    assert low.output(frames).dtype == torch.bfloat16


# ----------------------------------------------------------------------------- DySeg


def test_dyseg_finds_planted_scene_cuts():
    video = synthetic_video_features(24, 32, 64, scene_cuts=(8, 16), event_length=0, seed=5)
    means = video.features.mean(dim=1)
    # c = 3: exactly the two lowest transitions are cut, and they are the planted cuts.
    assert segment_cuts(transition_similarities(means), 3, -1.0).tolist() == [7, 15]
    assert dyseg(means, 3, -1.0).tolist() == [8, 8, 8]
    # The official defaults (c = 8, tau = 0.9) cut at least there.
    cuts = segment_cuts(transition_similarities(means), 8, 0.9).tolist()
    assert {7, 15} <= set(cuts) and len(cuts) == 7
    assert int(dyseg(means, 8, 0.9).sum()) == 24


def test_dyseg_threshold_adds_cuts():
    similarities = torch.tensor([0.99, 0.5, 0.95, 0.8, 0.97])
    assert segment_cuts(similarities, 1, 0.9).tolist() == [1, 3]  # below tau only
    assert segment_cuts(similarities, 2, 0.0).tolist() == [1]  # the lowest only
    assert segment_cuts(similarities, 3, 0.6).tolist() == [1, 3]
    assert segment_cuts(similarities, 3, 0.96).tolist() == [1, 2, 3]
    assert segment_lengths(similarities, 3, 0.96).tolist() == [2, 1, 1, 2]
    # Ties among the lowest go to the earlier transition.
    assert segment_cuts(torch.tensor([0.7, 0.5, 0.5, 0.5]), 3, 0.0).tolist() == [1, 2]


def test_dyseg_guard_for_short_videos():
    # T - 1 < c - 1: the official topk(c - 1) would raise; here every transition is cut.
    means = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    assert dyseg(means, 8, 0.9).tolist() == [1, 1, 1]
    assert dyseg(means[:1], 8, 0.9).tolist() == [1]
    same = torch.ones(4, 8)
    assert dyseg(same, 1, 0.9).tolist() == [4]  # no cut at all: one segment


def test_dyseg_validates():
    with pytest.raises(ValueError, match="num_segments"):
        dyseg(torch.randn(4, 3), 0, 0.9)
    with pytest.raises(ValueError, match="segment_threshold"):
        dyseg(torch.randn(4, 3), 2, float("nan"))
    with pytest.raises(ValueError, match="features"):
        dyseg(torch.randn(4, 3, 2), 2, 0.9)


# ----------------------------------------------------------------------------- budgets


def test_segment_plan_llava_video_split():
    # b = 23, d = 0.4: C = 9, S = 14 -> salient 3, 3, 2, 2, 2, 2 (remainder first);
    # anchor frames 5 and 1 (p = 4, counted back from the last); 9 = 5 + 4, the extra to frame 5.
    salient, context = segment_plan(6, 23, 20, 0.4, 4)
    assert salient == [3, 3, 2, 2, 2, 2]
    assert context == [0, 4, 0, 0, 0, 5]
    # One frame: S and C on it.
    assert segment_plan(1, 10, 30, 0.4, 4) == ([6], [4])


def test_segment_plan_moves_context_shortfall():
    # L = 4, P = 4, b = 16: C = 6, S = 10 -> salient 3, 3, 2, 2; the one anchor frame (3) has only 2
    # non-salient tokens, so 4 context tokens move to salient places with room, in frame order.
    salient, context = segment_plan(4, 16, 4, 0.4, 4)
    assert context == [0, 0, 0, 2]
    assert salient == [4, 4, 4, 2]
    # L = 5 (anchor frames 4 and 0), P = 3, b = 15: C = 6, S = 9 -> salient 2, 2, 2, 2, 1;
    # context 3 + 3 capped at 1 and 2.
    salient, context = segment_plan(5, 15, 3, 0.4, 4)
    assert [s + c for s, c in zip(salient, context)] == [3] * 5
    assert context == [1, 0, 0, 0, 2]


def test_per_frame_budgets_follow_the_segment_split():
    # One segment of 6 frames (no cut), P = 20, r = 0.2: B = 24, C = 9, S = 15 -> salient
    # 3, 3, 3, 2, 2, 2; context 5 on frame 5 and 4 on frame 1.
    frames = _video(6, 20, scene_cuts=())
    sel = _select(frames, 0.2, num_segments=1, segment_threshold=-1.0)
    assert sel.budgets.tolist() == [3, 7, 3, 2, 2, 7]


def test_segment_budgets_proportional_to_length():
    # Cuts after frames 3 and 5 (c = 3, two planted cuts): lengths 4, 2, 2; B = 32 -> 16, 8, 8.
    frames = _video(8, 16, scene_cuts=(4, 6), event_length=0)
    sel = _select(frames, 0.25, num_segments=3, segment_threshold=-1.0)
    budgets = sel.budgets.tolist()
    assert [sum(budgets[:4]), sum(budgets[4:6]), sum(budgets[6:])] == [16, 8, 8]


# ----------------------------------------------------------------------------- known answers


def test_planted_high_attention_token_is_kept_unchanged():
    frames = _video(16, 16, dim=32, scene_cuts=(8,), event_length=0)
    attention = _attention(16, 16) * 0.1
    attention[7, 9] = 5.0  # frame 7 is the anchor frame of the first segment
    sel = _select(frames, 0.25, attention, num_segments=2, segment_threshold=-1.0)
    flat = 7 * 16 + 9
    assert flat in sel.keep.tolist()
    row = sel.keep.tolist().index(flat)
    assert torch.equal(sel.tokens[row], frames[7, 9])


def test_salient_tokens_are_the_top_attention_tokens():
    # Every frame its own segment (T < c); budget 2 per frame, d = 0.4 -> C = 0: pure ATS.
    frames = _video(4, 10)
    attention = _attention(4, 10)
    sel = _select(frames, 0.2, attention)
    expected = []
    for t in range(4):
        expected += sorted((t * 10 + torch.topk(attention[t], 2).indices).tolist())
    assert sel.keep.tolist() == expected
    assert torch.equal(sel.tokens, frames.reshape(-1, frames.shape[-1])[sel.keep])


def _hand_frame() -> torch.Tensor:
    """One frame, P = 11, D = 2: salient tokens 0-2 (high attention), then two mirrored clusters
    of four: A = centre (2, 0) at 3 with (2, 0.2), (2, -0.2), (2.2, 0); B = centre (0, 2) at 7 with
    (0.2, 2), (-0.2, 2), (0, 2.2). The centres are the density peaks: the densest token of A
    (ties to the lower index) has the largest distance, B's centre the next densest peak."""
    return torch.tensor([
        [5.0, 5.0], [-3.0, 1.0], [1.0, -4.0],
        [2.0, 0.0], [2.0, 0.2], [2.0, -0.2], [2.2, 0.0],
        [0.0, 2.0], [0.2, 2.0], [-0.2, 2.0], [0.0, 2.2],
    ])[None]


@pytest.mark.parametrize("beta, weight", [(0.6, 0.6), (0.2, 0.25)])
def test_merged_anchor_hand_example(beta, weight):
    frame = _hand_frame()
    attention = torch.tensor([[9.0, 8.0, 7.0] + [0.1] * 8])
    # B = floor(0.5 * 11) = 5: C = floor(5 * 0.4) = 2 anchors, S = 3 salient.
    sel = _select(frame, 0.5, attention, beta=beta)
    assert sel.keep.tolist() == [0, 1, 2, 3, 7]
    assert torch.equal(sel.tokens[:3], frame[0, :3])
    # Three tokens join each anchor: w = max(1 / 4, beta).
    x = frame[0]
    merged_a = weight * x[3] + (1 - weight) * x[4:7].mean(0)
    merged_b = weight * x[7] + (1 - weight) * x[8:11].mean(0)
    assert torch.allclose(sel.tokens[3], merged_a, atol=1e-6)
    assert torch.allclose(sel.tokens[4], merged_b, atol=1e-6)
    assert torch.allclose(merged_a, torch.tensor([2.0 + (1 - weight) * 0.2 / 3, 0.0]))


def test_each_anchor_frame_merges_the_other_frames_anchors_too():
    # T = 2 in one segment, p = 1 (both frames are anchor frames), d = 1, P = 2, r = 0.5: B = 2,
    # one anchor per frame. Two tokens have equal density and score, so token 0 of each frame is
    # its anchor. Each anchor frame merges every other token of the segment, the other frame's
    # anchor included (as the official code does): 3 tokens, w = 0.6.
    x = torch.tensor([[[1.0, 0.2], [0.5, 1.0]], [[2.0, -0.3], [1.0, 0.9]]])
    sel = _select(x, 0.5, num_segments=1, segment_threshold=-1.0, context_ratio=1.0, anchor_period=1)
    assert sel.keep.tolist() == [0, 2]
    flat = x.reshape(4, 2)
    assert torch.allclose(sel.tokens[0], 0.6 * flat[0] + 0.4 * flat[[1, 2, 3]].mean(0), atol=1e-6)
    assert torch.allclose(sel.tokens[1], 0.6 * flat[2] + 0.4 * flat[[0, 1, 3]].mean(0), atol=1e-6)


def test_merge_into_anchors_weights():
    anchors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    pool = torch.tensor([[2.0, 0.1], [3.0, -0.1], [0.1, 5.0]])
    merged = merge_into_anchors(anchors, pool, 0.6)
    # Anchor 0 gets two tokens (w = max(1/3, 0.6)), anchor 1 one (w = 0.6), anchor 2 none.
    assert torch.allclose(merged[0], 0.6 * anchors[0] + 0.4 * pool[:2].mean(0))
    assert torch.allclose(merged[1], 0.6 * anchors[1] + 0.4 * pool[2])
    assert torch.equal(merged[2], anchors[2])
    merged = merge_into_anchors(anchors, pool, 0.0)
    assert torch.allclose(merged[0], (anchors[0] + pool[0] + pool[1]) / 3)
    assert torch.equal(merge_into_anchors(anchors, pool[:0], 0.6), anchors)


def test_planted_duplicate_frame_is_merged():
    # Frame 1 duplicates frame 0. One segment, d = 1 (all context): B = 16 -> the anchor frame
    # (frame 1, the last) takes all 16 tokens as anchors, and every token of frame 0 joins its
    # twin (cosine 1): w = max(1/2, 0.6), so each output equals its token, and frame 0 is gone.
    base = torch.randn(16, 8, generator=torch.Generator().manual_seed(7))
    frames = torch.stack([base, base])
    params = {"num_segments": 1, "segment_threshold": -1.0, "context_ratio": 1.0}
    sel = _select(frames, 0.5, **params)
    assert sel.budgets.tolist() == [0, 16]
    assert sel.keep.tolist() == list(range(16, 32))
    assert torch.allclose(sel.tokens, base, atol=1e-6)
    # Control: a distinct first frame is merged into the anchors too, and changes them.
    other = torch.randn(16, 8, generator=torch.Generator().manual_seed(8))
    sel = _select(torch.stack([other, base]), 0.5, **params)
    assert sel.budgets.tolist() == [0, 16]
    assert not torch.allclose(sel.tokens, base, atol=1e-3)


def test_duplicate_frame_stays_in_its_segment():
    # With the official c = 8 on 12 frames, the cosine-1 transition of a duplicate is never cut.
    frames = _video(12, 16, scene_cuts=(6,))
    frames[4] = frames[3]
    similarities = transition_similarities(frames.mean(1))
    assert similarities[3] > 0.9999
    cuts = segment_cuts(similarities, 8, 0.9).tolist()
    assert len(cuts) == 7 and 3 not in cuts and 5 in cuts


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("name, value", [
    ("num_segments", 0), ("num_segments", 2.0), ("segment_threshold", 1.5),
    ("segment_threshold", float("nan")), ("context_ratio", -0.1), ("context_ratio", 1.1),
    ("anchor_period", 0), ("anchor_period", True), ("beta", 1.2), ("beta", "0.5"), ("dpc_k", 0),
])
def test_bad_parameters(name, value):
    with pytest.raises(ValueError, match=name):
        _select(_video(4, 9), 0.5, **{name: value})


def test_missing_or_misshaped_attention():
    frames = _video(4, 9)
    with pytest.raises(ValueError, match="vision_attention"):
        vcast.select(frames, 0.5, method="fastvid")
    with pytest.raises(ValueError, match="vision_attention"):
        _select(frames, 0.5, torch.rand(4, 8))
    with pytest.raises(ValueError, match="vision_attention"):
        _select(frames, 0.5, torch.rand(36))
    bad = torch.rand(4, 9)
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="vision_attention"):
        _select(frames, 0.5, bad)
