"""FastVID baseline (baselines/fastvid/) and its DySeg segmentation (baselines/fastvid/dyseg.py)."""

from __future__ import annotations

import math

import pytest
import torch

import vcast
from baselines.fastvid.dyseg import (
    dyseg,
    segment_cuts,
    segment_lengths,
    transition_similarities,
)
from baselines.fastvid.official import llava_ov_context_counts
from baselines.fastvid.paper import NORM_EPS, merge_from_pool, merge_into_anchors, segment_plan
from baselines.fastvid.qwen2_5_vl_saliency import mean_query_saliency
from baselines.fastvid.release_loop import LoopOptions, segment_budgets
from vcast.models.vision_probe import column_mean_attention
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
    # tau, d and beta default to None, resolved per variant (paper: 0.9, 0.4, 0.6; see the variant tests).
    assert "fastvid" in vcast.available_methods()
    assert vcast.registry.method_inputs("fastvid") == ("vision_attention",)
    assert vcast.registry.method_variants("fastvid") == ("paper", "official", "vidcom2_qwen")
    assert vcast.method_params("fastvid") == {
        "num_segments": 8, "segment_threshold": None, "context_ratio": None,
        "anchor_period": 4, "beta": None, "dpc_k": 4, "ignore_threshold": None,
        "variant": "paper", "version": None, "seed": 0,
    }


def test_paper_defaults_are_unchanged():
    frames = _video(12, 20, scene_cuts=(4, 9))
    explicit = _select(frames, 0.3, segment_threshold=0.9, context_ratio=0.4, beta=0.6)
    default = _select(frames, 0.3)
    assert torch.equal(explicit.keep, default.keep) and torch.equal(explicit.tokens, default.tokens)
    seeded = _select(frames, 0.3, seed=5)  # paper has no noise: the seed changes nothing
    assert torch.equal(seeded.keep, default.keep) and torch.equal(seeded.tokens, default.tokens)


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


@pytest.mark.parametrize(("rows", "dim", "count", "jitter"), [
    (1, 4, 1, None), (2, 3, 1, None), (300, 64, 12, None), (513, 32, 78, None),
    (6, 64, 5, 0.0), (6, 16, 5, 3e-7), (4, 16, 3, 3e-7), (40, 16, 6, 1e-7), (301, 64, 12, 1e-7),
])
def test_merge_from_a_segment_pool_is_bit_equal_to_merging_a_rebuilt_pool(rows, dim, count, jitter):
    """The segment's pool built and normalised once, merged per anchor frame, gives exactly the
    merge of that frame's anchors with a pool rebuilt without them. ``jitter``: copies of two
    tokens scaled by ``1 + jitter * noise``, so similarities tie or differ in their last bits and
    the argmax depends on the exact rounding (a GEMM's rounding depends on its row count: with all
    ``m`` rows multiplied instead of the ``m - n`` that join, these cases come out different)."""
    generator = torch.Generator().manual_seed(rows * 1000 + dim * 10 + count)
    if jitter is None:
        pool = torch.randn(rows, dim, generator=generator)
    else:
        pool = torch.randn(4, dim, generator=generator)[torch.randint(0, 2, (rows,), generator=generator)]
        pool = pool * (1 + jitter * torch.randn(rows, dim, generator=generator))
    unit = torch.nn.functional.normalize(pool, dim=-1, eps=NORM_EPS)
    for trial in range(5):
        anchor_rows = torch.randperm(rows, generator=generator)[:count]
        rest = torch.ones(rows, dtype=torch.bool)
        rest[anchor_rows] = False
        expected = merge_into_anchors(pool[anchor_rows], pool[rest], 0.6)
        assert torch.equal(merge_from_pool(pool, unit, anchor_rows, 0.6), expected), trial


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


# ----------------------------------------------------------------------------- variant="official"


def _official(frames, ratio, attention=None, **params):
    if attention is None:
        attention = _attention(frames.shape[0], frames.shape[1])
    # The Qwen2.5-VL release ranks by its own saliency, a model input of its own.
    name = "vision_mean_query_attention" if params.get("version") == "qwen2_5_vl" else "vision_attention"
    return vcast.select(frames, ratio, method="fastvid", variant="official", **{name: attention}, **params)


def test_official_llava_ov_anchor_frame_distribution():
    # C = 7 (P = 196, r = 0.1: R = 19, S = 12). A segment of L frames: the frames j with
    # (L - 1 - j) % 4 == 0 get (7 L) // ceil(L / 4): L = 1 -> 7; L = 4 -> 28 on the last;
    # L = 5 -> 35 // 2 = 17 on the first and the last; L = 3 -> 21 on the last.
    counts = llava_ov_context_counts([1, 4, 5, 3], 13, 7, 4)
    assert counts.tolist() == [7, 0, 0, 0, 28, 17, 0, 0, 0, 17, 0, 0, 21]
    # p = 2, L = 3, C = 1: (1 * 3) // 2 = 1 = C, so frames 0 and 2 fall under the single-frame rule.
    assert llava_ov_context_counts([3], 3, 1, 2).tolist() == [1, 0, 1]


def test_official_llava_ov_per_frame_budgets_with_planted_cuts():
    # Three scenes of 3, 3, 2 frames; c = 3 cuts exactly the two scene changes (tau = -1 adds none).
    # P = 10, r = 0.5: R = int(5.0) = 5, S = 5 - int(5 * 0.4) = 3, C = 2. Segment of 3 (p = 4):
    # 2 * 3 // 1 = 6 context on its last frame; segment of 2: 4 on its last frame.
    frames = _video(8, 10, dim=12, scene_cuts=(3, 6), event_length=0)
    sel = _official(frames, 0.5, num_segments=3, segment_threshold=-1.0)
    assert sel.budgets.tolist() == [3, 3, 9, 3, 3, 9, 3, 7]
    assert sel.tokens.dtype == torch.float32


def _tie_frames(dtype=torch.float32):
    """T = 2 identical frames of P = 6, D = 2: two salient tokens (attention 9, 8), then
    a = (2, 1) and three copies of (1, 1). R = int(3.0) = 3, S = 3 - int(1.2) = 2, C = 1."""
    frame = torch.tensor([[5.0, -1.0], [-1.0, 5.0], [2.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    attention = torch.tensor([[9.0, 8.0, 1.0, 1.0, 1.0, 1.0]] * 2)
    return torch.stack([frame, frame]).to(dtype), attention


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 7])
def test_official_llava_ov_noise_decides_density_ties(seed):
    # c = 2 cuts the only transition: two single-frame segments, one anchor each among the four
    # non-salient tokens. The three copies of (1, 1) tie in density (exp(-0.5 / 4)); the one with the
    # largest noise of the release's single [T, P - S] = [2, 4] draw is the densest, with delta = the
    # largest distance, and wins; the other two have delta = 0, and a's score is lower.
    frames, attention = _tie_frames()
    noise = torch.rand(2, 4, generator=torch.Generator().manual_seed(seed))
    expected = [t * 6 + 3 + int(torch.argmax(noise[t, 1:])) for t in range(2)]
    sel = _official(frames, 0.5, attention, num_segments=2, seed=seed)
    assert sel.keep.tolist() == [0, 1, expected[0], 6, 7, expected[1]]
    # Merged: all four non-salient tokens (the anchor included) join the single anchor:
    # w = max(1 / 5, 0.6) = 0.6, mean = ((2 + 3) / 4, 1) -> 0.6 (1, 1) + 0.4 (1.25, 1) = (1.1, 1).
    torch.testing.assert_close(sel.tokens[2], torch.tensor([1.1, 1.0]))
    assert torch.equal(sel.tokens[:2], frames[0, :2])


def test_official_llava_ov_merge_is_bf16_arithmetic():
    # In bf16 the weight is bf16(0.6) = 0.6015625 and 1 - w = 0.3984375; 0.3984375 * 1.25 =
    # 0.498046875 (exact), 0.6015625 + 0.498046875 = 1.099609375 -> bf16 1.1015625 (spacing 1/128).
    frames, attention = _tie_frames(torch.bfloat16)
    sel = _official(frames, 0.5, attention.bfloat16(), num_segments=2)
    assert sel.tokens.dtype == torch.bfloat16
    assert sel.tokens[2].float().tolist() == [1.1015625, 1.0]
    high = _official(frames.float(), 0.5, attention, num_segments=2)
    assert torch.equal(high.keep, sel.keep)
    assert high.tokens[2].tolist() == [pytest.approx(1.1, abs=1e-6), 1.0]


def _bf16_cut_video() -> torch.Tensor:
    """Two frames of 8 identical tokens: (1, 0) and (200, 99) / 256. Their cosine is 0.89621 in
    float32 (a cut at tau = 0.9). With the release's bf16 normalisation it is 0.8984375, and the
    release compares the bf16 tensor with the Python 0.9, which torch casts to bf16(0.9) = 0.8984375:
    not below, so no cut."""
    frames = torch.empty(2, 8, 2)
    frames[0] = torch.tensor([1.0, 0.0])
    frames[1] = torch.tensor([200.0, 99.0]) / 256
    return frames


def test_official_dyseg_runs_in_the_input_dtype_and_paper_does_not():
    frames = _bf16_cut_video()
    attention = torch.linspace(1, 2, 8).expand(2, 8).contiguous()
    # P = 8, r = 0.5: R = 4, S = 3, C = 1. float32: the cut gives two single-frame segments.
    high = _official(frames, 0.5, attention, num_segments=1, segment_threshold=0.9)
    assert high.budgets.tolist() == [4, 4]
    # bf16: no cut -> one segment of 2 frames, (1 * 2) // 1 = 2 context tokens on frame 1.
    low = _official(frames.bfloat16(), 0.5, attention, num_segments=1, segment_threshold=0.9)
    assert low.budgets.tolist() == [3, 5]
    # paper: float32 scores whatever the input dtype (B = 8 over two segments of 1).
    paper_high = _select(frames, 0.5, attention, num_segments=1, segment_threshold=0.9)
    paper_low = _select(frames.bfloat16(), 0.5, attention, num_segments=1, segment_threshold=0.9)
    assert paper_high.budgets.tolist() == paper_low.budgets.tolist() == [4, 4]
    assert torch.equal(paper_high.keep, paper_low.keep)


@pytest.mark.parametrize("version", ["llava_ov", "llava_video", "qwen2_5_vl"])
def test_official_dyseg_raises_like_the_release_for_short_videos(version):
    frames = _video(5, 16)
    with pytest.raises(ValueError, match=r"T - 1 >= c - 1"):
        _official(frames, 0.25, version=version)  # c = 8 needs 7 transitions, T - 1 = 4
    assert _official(frames, 0.5, version=version, num_segments=5, segment_threshold=0.0).keep.numel() > 0


def test_official_llava_ov_single_frame_and_no_cut():
    # T = 1, c = 1: no transition and no cut -> one single-frame segment (the parallel version copes).
    frames = _video(1, 20)
    sel = _official(frames, 0.5, num_segments=1)
    assert sel.budgets.tolist() == [10]  # R = 10, S = 10 - 4 = 6, C = 4


def test_official_loop_versions_need_a_cut():
    frames = _video(6, 16)
    with pytest.raises(ValueError, match="no cut"):
        _official(frames, 0.5, version="llava_video", num_segments=1, segment_threshold=-1.0)


def test_official_llava_ov_refuses_zero_context():
    # P = 9, r = 0.25: R = 2, S = 2 - int(0.8) = 2, C = 0: the release's argmax over no anchor raises.
    with pytest.raises(ValueError, match="C = R - S = 0"):
        _official(_video(8, 9), 0.25)


def test_loop_budgets_llava_video_split():
    # R = 8, L = 3, d = 0.4: R L = 24, C = int(9.6) = 9, S = 15 -> [5, 5, 5]; ceil(3 / 4) = 1 anchor
    # frame, the last. L = 5, p = 2: 40, C = 16, S = 24 -> [5, 5, 5, 5, 4]; 3 chunks [6, 5, 5] on
    # frames 4, 2, 0 (reversed list).
    options = LoopOptions("llava_video")
    assert segment_budgets(3, 8, 16, torch.zeros(3, 2), 0.4, 4, options) == ([5, 5, 5], [0, 0, 9], 24)
    assert segment_budgets(5, 8, 16, torch.zeros(5, 2), 0.4, 2, options) == ([5, 5, 5, 5, 4], [5, 0, 5, 0, 6], 40)


def test_loop_budgets_ignore_subsegments_and_caps():
    # Unit features of frames 0, 1 equal, 2, 3 equal, cosine 0.707 between: sub-segments [2, 2].
    unit = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0]]), dim=-1)
    # Qwen2.5-VL: R L = 32, C = max(int(12.8), 1) = 12, S = 20 -> [10, 10] over the sub-segments;
    # C to the last sub-segment, capped at P // 2 = 8, its salient at P - 8 = 8: only the last frame of
    # each sub-segment gets tokens, and the caps drop 6 of the 32.
    qwen = LoopOptions("qwen2_5_vl", ignore=0.95)
    assert segment_budgets(4, 8, 16, unit, 0.4, 4, qwen) == ([0, 10, 0, 8], [0, 0, 0, 8], 32)
    # VidCom2 (d = 0.5): C = 16, S = 16 -> [8, 8]; C capped at 8, salient min(8, 16 - 8) = 8.
    port = LoopOptions("vidcom2_qwen", ignore=0.99, vidcom2=True)
    assert segment_budgets(4, 8, 16, unit, 0.5, 4, port) == ([0, 8, 0, 8], [0, 0, 0, 8], 32)
    # The context floor: R = 2, one frame, d = 0.4: int(0.8) = 0 -> Qwen2.5-VL and VidCom2 take 1.
    assert segment_budgets(1, 2, 16, unit[:1], 0.4, 4, LoopOptions("llava_video")) == ([2], [0], 2)
    assert segment_budgets(1, 2, 16, unit[:1], 0.4, 4, qwen) == ([1], [1], 2)
    assert segment_budgets(1, 2, 16, unit[:1], 0.4, 4, port) == ([1], [1], 2)


def test_official_versions_resolve_their_defaults():
    frames = _video(10, 25, scene_cuts=(5,))
    for version, explicit in [
        ("llava_ov", {"segment_threshold": 0.9, "context_ratio": 0.4, "beta": 0.6}),
        ("llava_video", {"segment_threshold": 0.9, "context_ratio": 0.4, "beta": 0.6}),
        ("qwen2_5_vl", {"segment_threshold": 0.84, "context_ratio": 0.4, "beta": 0.6, "ignore_threshold": 0.95}),
    ]:
        default = _official(frames, 0.3, version=version, num_segments=4)
        given = _official(frames, 0.3, version=version, num_segments=4, **explicit)
        assert torch.equal(default.keep, given.keep) and torch.equal(default.tokens, given.tokens)
    assert torch.equal(_official(frames, 0.3, num_segments=4).keep,
                       _official(frames, 0.3, version="llava_ov", num_segments=4).keep)


def test_official_seeded_and_global_rng_untouched():
    frames = _video(10, 30, scene_cuts=(4,))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = _official(frames, 0.3, num_segments=4, seed=11)
    assert torch.equal(torch.rand(3), expected)
    second = _official(frames, 0.3, num_segments=4, seed=11)
    assert torch.equal(first.keep, second.keep) and torch.equal(first.tokens, second.tokens)


# ----------------------------------------------------------------------------- Qwen2.5-VL saliency


def _rows(*columns: list[float]) -> torch.Tensor:
    """[N, H, 1] from one list of N values per head."""
    return torch.tensor(columns, dtype=torch.float32).T.unsqueeze(-1)


def test_qwen2_5_vl_saliency_hand_example():
    # d = 1 (sqrt(d) = 1), one temporal patch of 8 patches = 2 merge units, 2 heads.
    # Head 0: mean query 1; unit keys ln 3 and mean(1, -1, 2, -2) = 0 -> softmax (3/4, 1/4).
    # Head 1: mean query 1; unit keys 0 and 0 -> (1/2, 1/2). Head mean: (5/8, 3/8).
    ln3 = math.log(3.0)
    queries = _rows([0, 2, 1, 1, 3, -1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1])
    keys = _rows([ln3] * 4 + [1, -1, 2, -2], [0, 0, 0, 0, 5, -5, 1, -1])
    saliency = mean_query_saliency(queries, keys, num_frames=1)
    assert saliency.shape == (1, 2) and saliency.dtype == torch.float32
    assert torch.allclose(saliency, torch.tensor([[0.625, 0.375]]), atol=1e-6)


def test_qwen2_5_vl_saliency_is_the_mean_query_not_the_column_mean():
    # Seven queries at +1 look at unit 0 (keys +1), one at -15 at unit 1 (keys -1): the column
    # mean ranks unit 0 first; the mean query, (7 - 15) / 8 = -1, gives softmax(-1, 1): unit 1.
    queries = _rows([1, 1, 1, 1, 1, 1, 1, -15])
    keys = _rows([1, 1, 1, 1, -1, -1, -1, -1])
    saliency = mean_query_saliency(queries, keys, num_frames=1)
    expected = torch.tensor([[1 / (1 + math.e**2), 1 / (1 + math.e**-2)]])  # (0.1192, 0.8808)
    assert torch.allclose(saliency, expected, atol=1e-6)
    by_head = (queries.transpose(0, 1)[None], keys.transpose(0, 1)[None])  # [1, H, n, d]
    column = column_mean_attention(*by_head, 1.0).view(1, 2, 4).mean(-1)
    assert column[0, 0] > column[0, 1]  # the column mean ranks the other way


def test_qwen2_5_vl_saliency_per_temporal_patch_in_bf16():
    # Two temporal patches never mix; bf16 in: logits, float32 softmax and the head mean rounded to
    # bf16. Patch 0: logits (bf16(ln 3) = 1.1015625, 0) -> (0.75055, 0.24945) -> bf16 (0.75,
    # 0.2490234375). Patch 1: equal unit keys -> (0.5, 0.5).
    ln3 = math.log(3.0)
    queries = _rows([0, 2, 1, 1, 3, -1, 1, 1] + [2] * 8).to(torch.bfloat16)
    keys = _rows([ln3] * 4 + [1, -1, 2, -2] + [7] * 8).to(torch.bfloat16)
    saliency = mean_query_saliency(queries, keys, num_frames=2)
    assert saliency.dtype == torch.bfloat16
    assert saliency.float().tolist() == [[0.75, 0.2490234375], [0.5, 0.5]]


def test_qwen2_5_vl_saliency_window_order_is_undone_by_the_merger_order():
    # The encoder's window attention reorders whole merge units within each temporal patch; the
    # saliency comes out in that order and argsort(window_index) (the merger's reverse_indices)
    # restores raster order (integer queries and keys keep the means exact; the softmax sums its
    # terms in the other order, so equal up to float32 rounding).
    g = torch.Generator().manual_seed(0)
    frames, units, heads, dim = 2, 6, 2, 4
    queries = torch.randint(-3, 4, (frames * units * 4, heads, dim), generator=g).float()
    keys = torch.randint(-3, 4, (frames * units * 4, heads, dim), generator=g).float()
    window_index = torch.cat([torch.randperm(units, generator=g) + t * units for t in range(frames)])
    rows = (window_index[:, None] * 4 + torch.arange(4)).reshape(-1)  # unit order -> patch rows
    windowed = mean_query_saliency(queries[rows], keys[rows], frames)
    raster = mean_query_saliency(queries, keys, frames)
    restored = windowed.reshape(-1)[torch.argsort(window_index)].view(frames, units)
    assert torch.allclose(restored, raster, rtol=1e-6, atol=0)
    assert not torch.allclose(windowed, raster, rtol=1e-3, atol=0)  # the order does matter


def test_qwen2_5_vl_saliency_checks_shapes():
    with pytest.raises(ValueError, match="one shape"):
        mean_query_saliency(torch.zeros(8, 2, 4), torch.zeros(8, 2, 2), 1)
    with pytest.raises(ValueError, match="temporal patches"):
        mean_query_saliency(torch.zeros(12, 2, 4), torch.zeros(12, 2, 4), 2)  # 6 rows: no whole 4-unit


# ----------------------------------------------------------------------------- variant="vidcom2_qwen"


def _vidcom2(frames, ratio, **params):
    return vcast.select(frames, ratio, method="fastvid", variant="vidcom2_qwen", **params)


def _two_scene_video() -> torch.Tensor:
    """T = 8, P = 16, D = 8: scenes 0-3 and 4-7; in each, frames (0, 1) equal and (2, 3) equal,
    shifted from them (cosine of the frame means between 0.84 and 0.99). Token 5 of each scene's
    first pair has 10 x the norm of the others."""
    g = torch.Generator().manual_seed(0)
    frames = []
    for axis in (0, 1):
        direction = torch.zeros(8)
        direction[axis] = 2.0
        first = torch.randn(16, 8, generator=g) * 0.3 + direction
        first[5] *= 10
        second = first + 0.3 * torch.randn(1, 8, generator=g)
        frames += [first, first.clone(), second, second.clone()]
    return torch.stack(frames)


def test_vidcom2_qwen_ignore_subsegments_and_l2_salience():
    frames = _two_scene_video()
    unit = torch.nn.functional.normalize(frames.mean(1), dim=-1)
    similarity = (unit[:-1] * unit[1:]).sum(1)
    assert similarity[[0, 2, 4, 6]].min() > 0.9999 and similarity[3] < 0.84
    assert 0.84 < similarity[1] < 0.99 and 0.84 < similarity[5] < 0.99
    # c = 2: one cut (transition 3); sub-segments [2, 2] per scene (ignore = 0.99); R = 8; each
    # scene as in test_loop_budgets_ignore_subsegments_and_caps (vidcom2): [0, 8, 0, 16].
    sel = _vidcom2(frames, 0.5, num_segments=2)
    assert sel.budgets.tolist() == [0, 8, 0, 16, 0, 8, 0, 16]
    # The largest-norm token of frame 1 is salient and kept as it is.
    row = sel.keep.tolist().index(16 + 5)
    assert torch.equal(sel.tokens[row], frames[1, 5])
    # vision_attention is ignored (the L2 norm replaces it).
    with_attention = _vidcom2(frames, 0.5, num_segments=2, vision_attention=torch.rand(8, 16))
    assert torch.equal(with_attention.keep, sel.keep) and torch.equal(with_attention.tokens, sel.tokens)


def test_vidcom2_qwen_defaults_and_bf16():
    frames = _two_scene_video()
    default = _vidcom2(frames, 0.5, num_segments=2)
    explicit = _vidcom2(frames, 0.5, num_segments=2, segment_threshold=0.84, ignore_threshold=0.99,
                        context_ratio=0.5, beta=0.5, anchor_period=4, dpc_k=4)
    assert torch.equal(default.keep, explicit.keep) and torch.equal(default.tokens, explicit.tokens)
    low = _vidcom2(frames.bfloat16(), 0.5, num_segments=2)
    assert low.tokens.dtype == torch.bfloat16
    assert torch.equal(low.keep, default.keep)
    # The merge runs in bf16: not the float32 result rounded once.
    merged = [i for i, k in enumerate(default.keep.tolist()) if k // 16 == 3 and k % 16 != 5]
    assert not torch.equal(low.tokens[merged], default.tokens[merged].bfloat16())


def test_vidcom2_qwen_guards_short_videos_and_keeps_all_at_ratio_one():
    frames = _video(3, 16)
    sel = _vidcom2(frames, 0.5)  # c = 8 > T: k = min(c - 1, T - 1) = 2 lowest transitions
    assert sel.budgets.tolist() == [8, 8, 8]  # three single-frame segments, R = 8 each
    whole = _vidcom2(frames, 1.0)
    assert whole.keep.tolist() == list(range(48)) and torch.equal(whole.tokens, frames.reshape(48, -1))


def test_vidcom2_qwen_seed_decides_density_ties():
    frames = torch.randint(0, 2, (6, 16, 4), generator=torch.Generator().manual_seed(3)).float()
    keeps = {tuple(_vidcom2(frames, 0.3, seed=seed).keep.tolist()) for seed in range(6)}
    assert len(keeps) > 1
    again = _vidcom2(frames, 0.3, seed=4)
    assert torch.equal(again.keep, _vidcom2(frames, 0.3, seed=4).keep)


# ----------------------------------------------------------------------------- variant refusals


def test_unknown_variant_and_misplaced_version_are_refused():
    frames = _video(8, 16)
    with pytest.raises(ValueError, match="'clean'"):
        _select(frames, 0.5, variant="clean")
    with pytest.raises(ValueError, match="version"):
        _official(frames, 0.5, version="llava_next")
    with pytest.raises(ValueError, match="version"):
        _select(frames, 0.5, version="llava_ov")
    with pytest.raises(ValueError, match="ignore_threshold"):
        _official(frames, 0.5, ignore_threshold=0.9)
    with pytest.raises(ValueError, match="ignore_threshold"):
        _select(frames, 0.5, ignore_threshold=0.9)
    with pytest.raises(ValueError, match="seed"):
        _official(frames, 0.5, seed=-1)
    with pytest.raises(ValueError, match="vision_attention"):
        vcast.select(frames, 0.5, method="fastvid", variant="official")
