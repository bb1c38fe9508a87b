"""HoliTom (outer-LLM part): budget, determinism, static windows, merging and validation."""

from __future__ import annotations

import math

import pytest
import torch

import vcast
import vcast.temporal
from baselines.holitom.paper import apportion_groups
from baselines.holitom.static_windows import select_static_windows
from vcast.synthetic_features import synthetic_video_features


def _random_video(num_frames: int, tokens_per_frame: int, dim: int = 16, seed: int = 0) -> torch.Tensor:
    """Independent Gaussian tokens: adjacent frames are unrelated (phi ~ 0), so nothing is static."""
    return torch.randn(num_frames, tokens_per_frame, dim, generator=torch.Generator().manual_seed(seed))


def _attention(num_frames: int, tokens_per_frame: int, seed: int = 1) -> torch.Tensor:
    return torch.rand(num_frames, tokens_per_frame, generator=torch.Generator().manual_seed(seed))


def _select(frames: torch.Tensor, ratio: float, attention: torch.Tensor | None = None, **params) -> vcast.Selection:
    if attention is None:
        attention = _attention(frames.shape[0], frames.shape[1])
    return vcast.select(frames, ratio, method="holitom", vision_attention=attention, **params)


def _check_selection(sel: vcast.Selection, num_frames: int, tokens_per_frame: int, dim: int, ratio: float) -> None:
    expected = math.floor(ratio * num_frames * tokens_per_frame + 1e-9)
    assert sel.keep.numel() == expected
    assert int(sel.budgets.sum()) == expected
    assert sel.budgets.shape == (num_frames,)
    assert bool((sel.keep[1:] > sel.keep[:-1]).all())  # ascending and unique
    assert torch.equal(torch.bincount(sel.keep // tokens_per_frame, minlength=num_frames), sel.budgets)
    assert sel.tokens is not None and sel.tokens.shape == (expected, dim)
    assert sel.tokens.dtype == torch.float32


@pytest.mark.parametrize("shape_ratio", [(8, 16, 0.25), (5, 49, 0.15), (12, 30, 0.35), (3, 7, 0.5),
                                         (16, 49, 0.10), (6, 10, 1.0)])
def test_exact_count_synthetic(shape_ratio):
    num_frames, tokens_per_frame, ratio = shape_ratio
    video = synthetic_video_features(num_frames, tokens_per_frame, 24, scene_cuts=(num_frames // 2,),
                                     event_start=1, event_length=1, seed=3).features
    _check_selection(_select(video, ratio), num_frames, tokens_per_frame, 24, ratio)


@pytest.mark.parametrize("shape_ratio", [(8, 16, 0.25), (5, 49, 0.15), (12, 30, 0.35), (3, 7, 0.5)])
def test_exact_count_random_and_mixed(shape_ratio):
    num_frames, tokens_per_frame, ratio = shape_ratio
    _check_selection(_select(_random_video(num_frames, tokens_per_frame), ratio), num_frames, tokens_per_frame,
                     16, ratio)
    # Half of the positions frozen over the whole video: static and dynamic sets in every window.
    video = _random_video(num_frames, tokens_per_frame, seed=5)
    video[:, : tokens_per_frame // 2] = video[0, : tokens_per_frame // 2]
    _check_selection(_select(video, ratio), num_frames, tokens_per_frame, 16, ratio)


@pytest.mark.parametrize("ratio", [0.05, 0.1, 0.125, 0.25, 0.5, 0.9, 1.0])
def test_exact_count_static_video_saturated(ratio):
    """All frames identical: one window, r' = min(r T, 1) saturates for r >= 1/T; still B outputs."""
    frame = _random_video(1, 16, seed=2)
    video = frame.expand(8, -1, -1).clone()
    _check_selection(_select(video, ratio), 8, 16, 16, ratio)


def test_saturated_static_video_known_answer():
    """T=8 identical frames, P=16, r=0.25: the static set (16 positions, r'=1) gives 16 tokens in
    frame 0 (each its own cluster: the token itself); the 16 missing tokens are the removed copies
    of highest attention, at their own positions."""
    frame = _random_video(1, 16, seed=2)
    video = frame.expand(8, -1, -1).clone()
    attention = _attention(8, 16, seed=7)
    sel = _select(video, 0.25, attention)
    assert int(sel.budgets[0]) == 16
    torch.testing.assert_close(sel.tokens[:16], frame[0])
    later = attention[1:].reshape(-1)
    expected = torch.sort(torch.topk(later, 16).indices).values + 16
    assert torch.equal(sel.keep[16:], expected)
    assert torch.equal(sel.tokens[16:], video.reshape(-1, 16)[expected])


def test_static_video_low_ratio_all_in_first_frame():
    """r=0.1, T=8: r'=0.8, B=12 < 16 static positions, so all 12 merged tokens sit in frame 0."""
    video = _random_video(1, 16, seed=2).expand(8, -1, -1).clone()
    sel = _select(video, 0.1)
    assert sel.budgets.tolist() == [12, 0, 0, 0, 0, 0, 0, 0]


def test_deterministic():
    video = synthetic_video_features(12, 30, 24, scene_cuts=(6,), seed=4).features
    first, second = _select(video, 0.2), _select(video, 0.2)
    assert torch.equal(first.keep, second.keep)
    assert torch.equal(first.tokens, second.tokens)


@pytest.mark.parametrize("tokens_per_frame", [1, 2, 3])
@pytest.mark.parametrize("num_frames", [1, 2, 4])
@pytest.mark.parametrize("ratio", [0.34, 0.5, 1.0])
def test_tiny_inputs(num_frames, tokens_per_frame, ratio):
    video = _random_video(num_frames, tokens_per_frame, dim=4)
    _check_selection(_select(video, ratio), num_frames, tokens_per_frame, 4, ratio)
    static = video[:1].expand(num_frames, -1, -1).clone()
    _check_selection(_select(static, ratio), num_frames, tokens_per_frame, 4, ratio)


def test_single_frame_is_attention_top_k():
    video = _random_video(1, 20)
    attention = _attention(1, 20)
    sel = _select(video, 0.25, attention)
    assert torch.equal(sel.keep, torch.sort(torch.topk(attention[0], 5).indices).values)
    assert torch.equal(sel.tokens, video[0, sel.keep])


def test_bf16_matches_float32_upcast():
    video = synthetic_video_features(10, 25, 32, scene_cuts=(5,), seed=6).features.to(torch.bfloat16)
    attention = _attention(10, 25)
    low = _select(video, 0.2, attention)
    high = _select(video.float(), 0.2, attention)
    assert low.keep.numel() == math.floor(0.2 * 250)
    assert torch.equal(low.keep, high.keep)
    torch.testing.assert_close(low.tokens, high.tokens)


# --- the DP over static windows -------------------------------------------------------------


def test_dp_two_static_stretches_separated_by_a_cut():
    """phi > tau on all 4 positions for transitions 0-1, 1-2; nothing at 2-3 (a cut); 3 positions
    at 3-4, 4-5, 5-6: windows [0, 2] and [3, 6], reduced = 4 * 2 + 3 * 3."""
    above = torch.zeros(6, 4, dtype=torch.bool)
    above[0:2] = True
    above[3:6, :3] = True
    windows, reduced = select_static_windows(above, max_window=1024)
    assert windows == [(0, 2), (3, 6)]
    assert reduced == 17


def test_dp_no_static_gives_single_frames():
    windows, reduced = select_static_windows(torch.zeros(3, 5, dtype=torch.bool), max_window=1024)
    assert windows == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert reduced == 0


def test_dp_ties_keep_the_earlier_choice_and_max_window():
    """3 static frames with max_window=2: [0,1]+[2] and [0]+[1,2] both remove 4 copies; the strict >
    keeps the first found ([0,1], then frame 2 alone). max_window=1 disables windows."""
    above = torch.ones(2, 4, dtype=torch.bool)
    assert select_static_windows(above, max_window=2) == ([(0, 1), (2, 2)], 4)
    assert select_static_windows(above, max_window=3) == ([(0, 2)], 8)
    assert select_static_windows(above, max_window=1) == ([(0, 0), (1, 1), (2, 2)], 0)


def test_dp_prefers_the_larger_benefit():
    """Positions 0-3 static on 0-1; positions 0-1 static on 0-1-2: window [0,1] removes 4, window
    [0,2] removes 2*2=4 (tie: the smaller window found first stays), [0,1]+[2] keeps 4."""
    above = torch.zeros(2, 4, dtype=torch.bool)
    above[0] = True
    above[1, :2] = True
    assert select_static_windows(above, max_window=1024) == ([(0, 1), (2, 2)], 4)
    above[1, :3] = True  # now [0, 2] removes 3 * 2 = 6 > 4
    assert select_static_windows(above, max_window=1024) == ([(0, 2)], 6)


def test_static_windows_through_select():
    """Frames 0-2 one still image, frames 3-5 another: two windows with every position static,
    reduced = 64 of N = 96, r' = 3r; r = 0.25 gives B = 24 = 12 + 12 merged tokens, all in the
    windows' first frames."""
    video = torch.cat([_random_video(1, 16, seed=8).expand(3, -1, -1), _random_video(1, 16, seed=9).expand(3, -1, -1)])
    sel = _select(video, 0.25)
    assert sel.budgets.tolist() == [12, 0, 0, 12, 0, 0]


def test_scene_cut_splits_windows():
    """A planted scene cut at frame 6 of a slowly drifting video: the DP gives exactly the two
    scenes as windows; each window's 25 static tokens (r' = 1) sit in its first frame, and the
    25 deficit tokens are spread over the other frames."""
    video = synthetic_video_features(12, 25, 32, scene_cuts=(6,), event_length=0, seed=11).features
    above = vcast.temporal.cosine(video[:-1], video[1:]) > 0.8
    assert select_static_windows(above, max_window=1024) == ([(0, 5), (6, 11)], 2 * 25 * 5)
    sel = _select(video, 0.25)
    assert int(sel.budgets[0]) == 25 and int(sel.budgets[6]) == 25
    assert int(sel.budgets.sum()) == 75


def test_duplicate_frame_is_merged():
    """Random frames (nothing static) except frame 4 == frame 3: window [3, 4], its 20 static
    tokens merged into fewer outputs, all in frame 3; frame 4 gets none."""
    video = _random_video(8, 20, seed=12)
    video[4] = video[3]
    sel = _select(video, 0.25)
    assert int(sel.budgets[4]) == 0
    assert 0 < int(sel.budgets[3]) < 20
    in_frame = (sel.keep // 20) == 3
    merged, sources = sel.tokens[in_frame], video[3, sel.keep[in_frame] % 20]
    # beta-weighted centres move towards their members: the outputs are not the originals.
    assert not torch.allclose(merged, sources)
    # r' = 0.25 * 160 / 140 = 0.2857: official counts round(20 r') = 6 for the window's static set
    # and ceil(20 r') = 6 for each of the 6 other frames (42 > B = 40). 40 / 7 = 5.71 each: the 5
    # leftover tokens go to the first 5 groups in video order (frames 0, 1, 2, the window, frame 5).
    assert sel.budgets.tolist() == [6, 6, 6, 6, 0, 6, 5, 5]


def test_static_merge_known_answer():
    """Two identical frames, P=4 tokens in two tight pairs, r=0.25: B=2 = 2 clusters; centres are
    tokens 0 and 2 (equal densities: the lower index is denser), merged
    = 0.6 * centre + 0.4 * mean(other members), the centre not in the mean."""
    frame = torch.tensor([[0.0, 0.0], [0.1, 0.0], [10.0, 0.0], [10.0, 0.1]]) + torch.tensor([1.0, 1.0])
    video = frame.expand(2, -1, -1).clone()
    sel = _select(video, 0.25)
    assert sel.keep.tolist() == [0, 2]
    expected = 0.6 * frame[[0, 2]] + 0.4 * frame[[1, 3]]
    torch.testing.assert_close(sel.tokens, expected)
    sel = _select(video, 0.25, beta=0.0)
    torch.testing.assert_close(sel.tokens, frame[[1, 3]])


def test_static_tokens_are_window_averages():
    """Frame 1 = 1.2 * frame 0 (cosine 1): one window; r = 0.5 gives r' = 1 and B = 4 = P, so
    every static position is its own cluster and outputs the average over the window, in frame 0."""
    frame = _random_video(1, 4, seed=19)[0]
    video = torch.stack([frame, 1.2 * frame])
    sel = _select(video, 0.5)
    assert sel.keep.tolist() == [0, 1, 2, 3]
    torch.testing.assert_close(sel.tokens, 1.1 * frame)


def test_planted_high_attention_dynamic_token_kept():
    video = _random_video(6, 30, seed=13)
    attention = _attention(6, 30)
    attention[2, 17] = 5.0
    sel = _select(video, 0.05, attention)
    where = 2 * 30 + 17
    assert where in sel.keep.tolist()
    row = int((sel.keep == where).nonzero())
    assert torch.equal(sel.tokens[row], video[2, 17])


def test_dynamic_frames_follow_attention_top_k():
    """Nothing static: r' = r, every frame gets ceil(P r) = 3 (B = 12 splits evenly), its top-3."""
    video = _random_video(4, 10, seed=14)
    attention = _attention(4, 10, seed=15)
    sel = _select(video, 0.3, attention)
    expected = torch.cat([torch.sort(torch.topk(attention[t], 3).indices).values + 10 * t for t in range(4)])
    assert torch.equal(sel.keep, expected)
    assert torch.equal(sel.tokens, video.reshape(-1, 16)[expected])


def test_tau_default_depends_on_ratio():
    """Adjacent frames at cosine 0.7 everywhere: static under tau=0.65 (r <= 0.10), not under 0.8."""
    dim, tokens = 8, 10
    first = torch.nn.functional.normalize(_random_video(1, tokens, dim, seed=16)[0], dim=-1)
    other = torch.nn.functional.normalize(_random_video(1, tokens, dim, seed=17)[0], dim=-1)
    orthogonal = torch.nn.functional.normalize(other - (other * first).sum(-1, keepdim=True) * first, dim=-1)
    second = 0.7 * first + math.sqrt(1 - 0.49) * orthogonal
    video = torch.stack([first, second])
    assert int(_select(video, 0.10).budgets[1]) == 0  # one window: everything in frame 0
    assert int(_select(video, 0.10, tau=0.8).budgets[1]) > 0
    assert int(_select(video, 0.15).budgets[1]) > 0
    assert int(_select(video, 0.15, tau=0.65).budgets[1]) == 0


def test_dominant_fraction_merges_part_of_the_dynamic_budget():
    video = _random_video(4, 20, seed=18)
    attention = _attention(4, 20)
    sel = _select(video, 0.25, attention, dominant_fraction=0.4)  # 5 per frame: 3 by attention + 2 clusters
    _check_selection(sel, 4, 20, 16, 0.25)
    top = torch.topk(attention[0], 3).indices
    assert set(top.tolist()) <= set(sel.keep[sel.keep < 20].tolist())
    originals = video.reshape(-1, 16)[sel.keep]
    unchanged = (sel.tokens == originals).all(dim=1)
    assert int(unchanged.sum()) < sel.keep.numel()  # some outputs are merged clusters


def test_apportion_groups():
    counts, deficit = apportion_groups(10, [6.0, 6.0, 0.0, 3.0], [20, 4, 5, 10])
    assert sum(counts) == 10 and deficit == 0
    assert counts[2] == 0 and counts[1] <= 4
    assert counts == [4, 4, 0, 2]  # 10 * (6, 6, 3) / 15 = (4, 4, 2)
    counts, deficit = apportion_groups(30, [1.0, 1.0, 0.0], [5, 5, 10])
    assert counts == [5, 5, 10] and deficit == 10
    counts, deficit = apportion_groups(7, [1.0, 1.0, 1.0], [1, 10, 10])
    assert counts == [1, 3, 3] and deficit == 0


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize("params", [dict(tau=1.5), dict(tau="high"), dict(tau=float("nan")), dict(beta=-0.1),
                                    dict(beta=1.5), dict(dominant_fraction=2.0), dict(dpc_k=0), dict(dpc_k=2.5),
                                    dict(max_window=0), dict(max_window=True)])
def test_bad_parameters(params):
    name = next(iter(params))
    with pytest.raises(ValueError, match=name):
        _select(_random_video(3, 4), 0.5, **params)


def test_missing_or_misshaped_attention():
    video = _random_video(3, 4)
    with pytest.raises(ValueError, match="vision_attention"):
        vcast.select(video, 0.5, method="holitom")
    with pytest.raises(ValueError, match="vision_attention"):
        _select(video, 0.5, torch.rand(3, 5))
    with pytest.raises(ValueError, match="vision_attention"):
        _select(video, 0.5, torch.ones(3, 4, dtype=torch.long))


# Variants: "official" (the HoliTom release) and "vidcom2_qwen" (the VidCom2 Qwen port) ----------
def _variant(frames: torch.Tensor, ratio: float, variant: str, attention: torch.Tensor | None = None,
             **params) -> vcast.Selection:
    return vcast.select(frames, ratio, method="holitom", variant=variant, vision_attention=attention, **params)


def _three_static_points() -> tuple[torch.Tensor, torch.Tensor]:
    """T=2, P=4, D=2: positions 0-2 identical in both frames at (1,0), (2,0), (4,0) (static); position 3
    is (0,1) then (0,-1) (dynamic). Window [0,1], reduced 3, r=0.25 -> r' = 0.25 / (5/8) = 0.4:
    round(3 * 0.4) = 1 static cluster, ceil(1 * 0.4) = 1 dynamic token per frame."""
    frame = torch.tensor([[1.0, 0.0], [2.0, 0.0], [4.0, 0.0], [0.0, 1.0]])
    video = torch.stack([frame, frame.clone()])
    video[1, 3] = torch.tensor([0.0, -1.0])
    return video, torch.rand(2, 4, generator=torch.Generator().manual_seed(3))


def test_variants_registered_and_unknown_refused():
    from vcast.registry import method_variants

    assert method_variants("holitom") == ("paper", "official", "vidcom2_qwen")
    video, attention = _three_static_points()
    with pytest.raises(ValueError, match="'clean'"):
        _variant(video, 0.25, "clean", attention)


@pytest.mark.parametrize("seed,expected_static", [(0, 2.2), (1, 1.8), (2, 1.8), (3, 3.0)])
def test_official_static_merge_known_answer_and_noise_seed(seed, expected_static):
    """With k = min(7, 1) = 1 every density is exp(0) = 1, plus the release's ``rand * 1e-6`` noise
    (float32: 1 + 1e-6 u has only a few levels). ``rand(1, 3)`` after ``manual_seed(seed)``:
    seed 0 -> densities 1 + [4.8, 7.2, 1.2]e-7: (2,0) densest, delta 3/sqrt2 (the largest), centre
    (2,0): 0.6 (2,0) + 0.4 mean((1,0),(4,0)) = (2.2, 0). seed 1 -> [7.2, 2.4, 3.6]e-7: (1,0) densest;
    (4,0) also has delta 3/sqrt2 (its only denser point is (1,0)) but a lower density: centre (1,0),
    (1.8, 0). seed 2 -> [6.0, 3.6, 6.0]e-7: (1,0) and (4,0) tie in float32, neither is denser, both
    deltas are the maximum: equal scores, ``topk`` takes the first: (1.8, 0). seed 3 -> [0, 1.2,
    2.4]e-7: centre (4,0): 0.6 (4,0) + 0.4 (1.5, 0) = (3.0, 0)."""
    video, attention = _three_static_points()
    state = torch.get_rng_state()
    sel = _variant(video, 0.25, "official", attention, seed=seed)
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is not used
    # Output order [static, frame 0 dynamic, frame 1 dynamic]: slots 0, 1 of frame 0 and slot 0 of frame 1.
    assert sel.keep.tolist() == [0, 1, 4] and sel.budgets.tolist() == [2, 1]
    expected = torch.tensor([[expected_static, 0.0], [0.0, 1.0], [0.0, -1.0]])
    torch.testing.assert_close(sel.tokens, expected)
    again = _variant(video, 0.25, "official", attention, seed=seed)
    assert torch.equal(again.tokens, sel.tokens) and torch.equal(again.keep, sel.keep)


def test_official_counts_use_round_half_even_and_ceil():
    """T=2, P=10, positions 0-4 static: reduced 5, r=0.375 -> r' = 0.375 / 0.75 = 0.5: static
    round(2.5) = 2 (half to even) clusters, dynamic ceil(2.5) = 3 per frame: 8 outputs (paper: 7)."""
    video = _random_video(2, 10, dim=8, seed=11)
    video[1, :5] = video[0, :5]
    attention = _attention(2, 10, seed=12)
    sel = _variant(video, 0.375, "official", attention)
    assert sel.keep.tolist() == [0, 1, 2, 3, 4, 10, 11, 12] and sel.budgets.tolist() == [5, 3]
    # Frame 1's dynamic tokens: its 3 highest-attention dynamic positions, in index order.
    top = torch.sort(torch.topk(attention[1, 5:], 3).indices).values + 5
    assert torch.equal(sel.tokens[5:], video[1, top])
    assert _select(video, 0.375, attention).keep.numel() == 7


def test_official_multi_window_order_and_single_frames():
    """T=4, P=4: frames 0-1 share positions 0-1 (a window), frames 2 and 3 unrelated (single frames).
    r=0.5: reduced 2, r' = 0.5 / (14/16) = 4/7: static round(8/7) = 1, dynamic ceil(8/7) = 2 in
    frames 0-1, ceil(16/7) = 3 in frames 2, 3. Frames 2, 3 keep their top-3 attention tokens."""
    video = _random_video(4, 4, dim=8, seed=21)
    video[1, :2] = video[0, :2]
    attention = _attention(4, 4, seed=22)
    sel = _variant(video, 0.5, "official", attention, tau=0.8)
    assert sel.budgets.tolist() == [3, 2, 3, 3]
    assert sel.keep.tolist() == [0, 1, 2, 4, 5, 8, 9, 10, 12, 13, 14]
    for frame, rows in ((2, slice(5, 8)), (3, slice(8, 11))):
        top = torch.sort(torch.topk(attention[frame], 3).indices).values
        assert torch.equal(sel.tokens[rows], video[frame, top])
    for frame, rows in ((0, slice(1, 3)), (1, slice(3, 5))):
        top = torch.sort(torch.topk(attention[frame, 2:], 2).indices).values + 2
        assert torch.equal(sel.tokens[rows], video[frame, top])


def test_official_bf16_static_mean_rounds_in_bf16():
    """Static position 0: (1, 0) then (1 + 2^-7, 0). Window mean: float32 1.00390625; in bf16 that
    is a tie between 1 and 1.0078125 -> 1.0 (even). The official variant averages in the input
    dtype; paper gives the float32 mean for both dtypes."""
    video = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0078125, 0.0], [0.0, -1.0]]])
    attention = torch.tensor([[0.2, 0.7], [0.6, 0.3]])
    # r=0.5: reduced 1, r' = 2/3: one static cluster (the mean itself), one dynamic token per frame.
    full = _variant(video, 0.5, "official", attention)
    half = _variant(video.bfloat16(), 0.5, "official", attention)
    assert full.tokens.dtype == torch.float32 and half.tokens.dtype == torch.bfloat16
    assert full.keep.tolist() == half.keep.tolist() == [0, 1, 2]
    assert full.tokens[0].tolist() == [1.00390625, 0.0] and half.tokens[0].tolist() == [1.0, 0.0]
    paper = [_select(v, 0.5, attention).tokens for v in (video, video.bfloat16())]
    assert torch.equal(paper[0], paper[1]) and paper[0].dtype == torch.float32


def test_official_bf16_phi_changes_the_windows():
    """Position 0: (1, 0) then (1, 0.74609375): cos 0.8015 > tau = 0.8 in float32, but in bf16
    the cosine rounds to 0.80078125 and tau to bf16(0.8) = 0.80078125: not static. float32: one
    window (static mean + one dynamic token per frame, 3 outputs); bf16: two single frames with
    ceil(2 * 0.5) = 1 top-attention token each. Paper (float32 phi) is the same for both dtypes."""
    video = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.74609375], [0.0, -1.0]]])
    attention = torch.tensor([[0.1, 0.9], [0.8, 0.2]])
    full = _variant(video, 0.5, "official", attention, tau=0.8)
    half = _variant(video.bfloat16(), 0.5, "official", attention, tau=0.8)
    assert full.keep.tolist() == [0, 1, 2] and full.tokens.tolist() == [[1.0, 0.373046875], [0.0, 1.0], [0.0, -1.0]]
    assert half.keep.tolist() == [0, 2] and half.tokens.float().tolist() == [[0.0, 1.0], [1.0, 0.74609375]]
    paper = [_select(v, 0.5, attention, tau=0.8) for v in (video, video.bfloat16())]
    assert torch.equal(paper[0].keep, paper[1].keep) and torch.equal(paper[0].tokens, paper[1].tokens)
    # The Qwen port computes phi in float32: a window in both dtypes, at linspace slots.
    for v in (video, video.bfloat16()):
        assert _variant(v, 0.5, "vidcom2_qwen").keep.tolist() == [0, 1, 3]


def test_official_tau_default_depends_on_ratio_and_vidcom2_qwen_does_not():
    """phi = 0.7 everywhere: static under tau 0.65 (the release's scripts at r <= 0.10), not under 0.8."""
    angle = math.acos(0.7)
    frames = [torch.tensor([[math.cos(k * angle), math.sin(k * angle)]] * 4) for k in range(3)]
    video = torch.stack(frames)  # [3, 4, 2]: each frame rotated by acos(0.7) from the previous
    attention = _attention(3, 4, seed=31)
    low = _variant(video, 0.10, "official", attention)
    assert low.keep.numel() == 1  # one window of 3 frames, 4 static positions: round(4 * 0.3) = 1
    assert _variant(video, 0.10, "official", attention, tau=0.8).keep.numel() == 3  # ceil(4 * 0.1) per frame
    assert _variant(video, 0.10, "vidcom2_qwen").keep.numel() == 3  # tau 0.8 at every ratio


def test_vidcom2_qwen_linspace_slots_and_l2_norm_attention():
    """T=1, P=8, r=0.25: ceil(8 * 0.25) = 2 tokens of largest L2 norm (index order), written at
    linspace(0, 7, 2) = [0, 7]; vision_attention is ignored."""
    norms = torch.tensor([1.0, 5.0, 2.0, 1.5, 1.0, 4.0, 1.0, 0.5])
    video = (norms[:, None] * torch.tensor([0.6, 0.8]))[None]
    for attention in (None, torch.arange(8.0)[None]):
        sel = _variant(video, 0.25, "vidcom2_qwen", attention)
        assert sel.keep.tolist() == [0, 7] and sel.budgets.tolist() == [2]
        assert torch.equal(sel.tokens, video[0, [1, 5]])
    # Official on the same frame ranks by vision_attention and packs the first slots.
    official = _variant(video, 0.25, "official", torch.arange(8.0)[None])
    assert official.keep.tolist() == [0, 1] and torch.equal(official.tokens, video[0, [6, 7]])


def test_vidcom2_qwen_static_first_then_dynamic_at_linspace_slots():
    """The known-answer video of the static-merge test through the port: the 3 outputs [static,
    frame 0 dynamic, frame 1 dynamic] go to linspace(0, 7, 3) = [0, 3, 7] (bf16 in, bf16 out)."""
    video, _ = _three_static_points()
    for dtype in (torch.float32, torch.bfloat16):
        sel = _variant(video.to(dtype), 0.25, "vidcom2_qwen", seed=0)
        assert sel.keep.tolist() == [0, 3, 7] and sel.budgets.tolist() == [2, 1]
        assert sel.tokens.dtype == dtype
        # seed 0: the noise makes (2, 0) the densest: 0.6 (2,0) + 0.4 (2.5, 0) = (2.2, 0).
        torch.testing.assert_close(sel.tokens.float(), torch.tensor([[2.2, 0.0], [0.0, 1.0], [0.0, -1.0]]),
                                   atol=1e-2 if dtype == torch.bfloat16 else 1e-6, rtol=0)
    many = _variant(_random_video(6, 10, seed=41), 0.3, "vidcom2_qwen")
    expected = torch.linspace(0, 59, many.keep.numel()).long()
    assert torch.equal(many.keep, expected) and many.keep.numel() == 18  # ceil(10 * 0.3) per frame


def test_official_variants_deterministic_and_seeded():
    video = _random_video(6, 16, seed=51)
    video[:, :8] = video[0, :8] + 0.01 * _random_video(6, 8, seed=52)
    attention = _attention(6, 16, seed=53)
    for variant in ("official", "vidcom2_qwen"):
        first = _variant(video, 0.3, variant, attention, seed=3)
        second = _variant(video, 0.3, variant, attention, seed=3)
        assert torch.equal(first.keep, second.keep) and torch.equal(first.tokens, second.tokens)
    with pytest.raises(ValueError, match="seed"):
        _variant(video, 0.3, "official", attention, seed=-1)


def test_official_bf16_beta_merge_rounds_each_operation():
    """Static tokens (1.0078125, 0) and (1.03125, 0) in both frames, one cluster (r=0.25: r' = 0.375,
    round(2 * 0.375) = 1); seed 0 makes the second the centre. bf16, as released:
    bf16(0.6 * 1.03125) = 0.6171875, bf16(0.4 * 1.0078125) = 0.40234375, sum 1.01953125 -> a tie,
    rounded to even 1.015625. float32: 1.021875 (its bf16 would be 1.0234375)."""
    frame = torch.tensor([[1.0078125, 0.0], [1.03125, 0.0], [0.0, 1.0]])
    video = torch.stack([frame, frame.clone()])
    video[1, 2] = torch.tensor([0.0, -1.0])
    attention = torch.rand(2, 3, generator=torch.Generator().manual_seed(3))
    half = _variant(video.bfloat16(), 0.25, "official", attention, seed=0)
    full = _variant(video, 0.25, "official", attention, seed=0)
    assert half.keep.tolist() == full.keep.tolist() == [0, 1, 3]
    assert half.tokens[0].float().tolist() == [1.015625, 0.0]
    torch.testing.assert_close(full.tokens[0], torch.tensor([1.021875, 0.0]))
    quirk = _variant(video.bfloat16(), 0.25, "vidcom2_qwen", seed=0)
    assert quirk.tokens[0].float().tolist() == [1.015625, 0.0]  # the port merges in bf16 too


def test_official_dominant_fraction_orders_dominant_then_contextual():
    """T=1, P=4, r=1, D=0.5: ceil(4) = 4 outputs, round(4 * 0.5) = 2 dominant by attention (index
    order), then 2 contextual clusters of the other 2 tokens (each its own centre, index order)."""
    video = _random_video(1, 4, dim=6, seed=61)
    attention = torch.tensor([[0.1, 0.9, 0.2, 0.8]])
    sel = _variant(video, 1.0, "official", attention, dominant_fraction=0.5)
    assert sel.keep.tolist() == [0, 1, 2, 3]
    assert torch.equal(sel.tokens, video[0, [1, 3, 0, 2]])
