"""PruneVid stage A (``prunevid_stage_a``): counts, determinism, edge cases and known answers."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import vcast
from baselines.prunevid_stage_a.official import (
    cluster_vectors,
    merge_group,
    read_groups,
    window_similarity,
)
from baselines.prunevid_stage_a.paper import group_quotas, proportional_quotas, temporal_windows
from baselines.prunevid_stage_a.temporal_segments import refine_labels, run_lengths
from vcast.synthetic_features import synthetic_video_features

METHOD = "prunevid_stage_a"


def mixed_video(num_frames: int, tokens_per_frame: int, dim: int, seed: int) -> torch.Tensor:
    """[T, P, D]: even locations static (one vector per location plus 0.05 noise), odd
    locations fresh random tokens every frame (pairwise cosine ~ 0: dynamic)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_frames, tokens_per_frame, dim, generator=g)
    anchors = torch.randn(tokens_per_frame, dim, generator=g)
    even = torch.arange(0, tokens_per_frame, 2)
    x[:, even] = anchors[even] + 0.05 * x[:, even]
    return x


def budget(ratio: float, t: int, p: int) -> int:
    return math.floor(ratio * t * p + 1e-9)


def check_selection(sel, t: int, p: int, d: int, count: int) -> None:
    assert sel.keep.numel() == count
    assert int(sel.budgets.sum()) == count
    assert sel.budgets.shape == (t,)
    assert torch.all(sel.keep[1:] > sel.keep[:-1])  # ascending and unique
    assert sel.keep.numel() == 0 or (int(sel.keep.min()) >= 0 and int(sel.keep.max()) < t * p)
    assert torch.equal(sel.budgets, torch.bincount(sel.keep // p, minlength=t))
    assert sel.tokens.shape == (count, d) and sel.tokens.dtype == torch.float32


@pytest.mark.parametrize("t,p,r", [(8, 16, 0.25), (5, 49, 0.15), (12, 30, 0.35), (3, 7, 0.5), (16, 36, 0.1)])
def test_exact_count(t: int, p: int, r: float) -> None:
    d = 24
    expected = budget(r, t, p)
    for frames in (mixed_video(t, p, d, seed=t + p), torch.randn(t, p, d, generator=torch.Generator().manual_seed(1))):
        sel = vcast.select(frames, r, method=METHOD)
        check_selection(sel, t, p, d, expected)


def test_exact_count_on_synthetic_scenes() -> None:
    video = synthetic_video_features(16, 49, 32, scene_cuts=(5, 11), seed=3)
    for r in (0.05, 0.1, 0.25):
        sel = vcast.select(video.features, r, method=METHOD)
        check_selection(sel, 16, 49, 32, budget(r, 16, 49))


def test_deterministic() -> None:
    frames = mixed_video(12, 30, 16, seed=5)
    a = vcast.select(frames, 0.3, method=METHOD)
    b = vcast.select(frames.clone(), 0.3, method=METHOD)
    assert torch.equal(a.keep, b.keep) and torch.equal(a.tokens, b.tokens)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("r", [0.5, 1.0])
def test_single_frame_and_tiny_p(p: int, r: float) -> None:
    frames = torch.randn(1, p, 8, generator=torch.Generator().manual_seed(p))
    sel = vcast.select(frames, r, method=METHOD)
    check_selection(sel, 1, p, 8, budget(r, 1, p))
    if r == 1.0:  # one frame: one window with W = 1, nothing static, every token kept as is
        assert torch.equal(sel.tokens, frames[0])


@pytest.mark.parametrize("p", [1, 2, 3])
def test_tiny_p_many_frames(p: int) -> None:
    frames = torch.randn(6, p, 8, generator=torch.Generator().manual_seed(p))  # nothing static
    sel = vcast.select(frames, 0.5, method=METHOD)
    check_selection(sel, 6, p, 8, budget(0.5, 6, p))


def test_bf16_matches_float32_upcast() -> None:
    frames = mixed_video(8, 16, 32, seed=2).to(torch.bfloat16)
    low = vcast.select(frames, 0.25, method=METHOD)
    high = vcast.select(frames.float(), 0.25, method=METHOD)
    assert low.keep.numel() == budget(0.25, 8, 16)
    assert torch.equal(low.keep, high.keep)
    assert torch.allclose(low.tokens, high.tokens)


# --- temporal segmentation ---------------------------------------------------------------------

def test_refine_labels_hand_cases() -> None:
    # A label's shorter runs are dissolved; the dissolved run joins its only neighbour.
    assert refine_labels([0, 1, 0, 0, 1, 1, 2, 2]) == [0, 0, 0, 0, 1, 1, 2, 2]
    # Every label has longest run 1: all dissolved, no neighbour -> label 0.
    assert refine_labels([0, 1, 2, 0]) == [0, 0, 0, 0]
    # Tie between neighbour runs: left wins; a longer right run wins.
    assert refine_labels([0, 0, 1, 2, 2]) == [0, 0, 0, 2, 2]
    assert refine_labels([0, 0, 1, 2, 2, 2]) == [0, 0, 2, 2, 2, 2]
    # Equally long longest runs of one label are all kept.
    assert refine_labels([0, 0, 1, 1, 0, 0]) == [0, 0, 1, 1, 0, 0]
    # Sequential fill: frame 0 joins label 1 first, so label 1's run is 3 long when frame 3 is
    # filled, which ties label 3's run of 3 -> left.
    assert refine_labels([0, 1, 1, 2, 3, 3, 3]) == [1, 1, 1, 1, 3, 3, 3]
    assert run_lengths([1, 1, 1, 1, 3, 3, 3]) == [4, 3]
    assert run_lengths([0]) == [1]


def test_planted_scene_cuts_are_window_boundaries() -> None:
    for seed in range(5):
        video = synthetic_video_features(32, 16, 32, scene_cuts=(8, 16, 24), event_length=0, seed=seed)
        windows = temporal_windows(video.features.mean(dim=1), num_clusters=8, k=7)
        assert sum(windows) == 32
        starts = set(itertools.accumulate([0] + windows[:-1]))
        assert {8, 16, 24} <= starts


def test_scene_windows_through_select() -> None:
    # Four scenes of four nearly static frames, k = 3: windows are exactly the scenes, and at
    # r = 1 every window's P static tokens sit in its first frame.
    for seed in range(3):
        video = synthetic_video_features(16, 16, 32, scene_cuts=(4, 8, 12), event_length=0, seed=seed)
        sel = vcast.select(video.features, 1.0, method=METHOD, dpc_k=3)
        assert sel.budgets.tolist() == [16, 0, 0, 0] * 4
        for w in range(4):
            scene = video.features[4 * w : 4 * w + 4]
            assert torch.allclose(sel.tokens[16 * w : 16 * w + 16], scene.mean(dim=0), atol=1e-5)


# --- static / dynamic split --------------------------------------------------------------------

def test_fully_static_window_is_averaged_into_first_frame() -> None:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(20, 16, generator=g)
    frames = base + 0.01 * torch.randn(4, 20, 16, generator=g)  # T = 4: one temporal cluster
    sel = vcast.select(frames, 0.25, method=METHOD)  # B = 20 = P: every static token kept
    assert sel.keep.tolist() == list(range(20))
    assert torch.allclose(sel.tokens, frames.mean(dim=0), atol=1e-6)
    assert not torch.allclose(sel.tokens, frames[0], atol=1e-4)  # a mean, not frame 0
    # Static averaging leaves 20 < B = 80 tokens at r = 1: all are kept, count < B.
    full = vcast.select(frames, 1.0, method=METHOD)
    assert full.keep.numel() == 20 and full.budgets.tolist() == [20, 0, 0, 0]


def test_planted_duplicate_frame_is_merged() -> None:
    # Four scenes of two frames; inside a scene the tokens are dynamic (a small scene base plus
    # large per-frame noise), except scene 2 whose second frame duplicates its first. dpc_k = 2
    # so that the DPC density neighbourhood fits in a two-frame scene.
    def video(duplicate: bool, seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        bases = 2.0 * torch.randn(4, 1, 32, generator=g)
        x = bases.repeat_interleave(2, dim=0) + 3.0 * torch.randn(8, 16, 32, generator=g)
        if duplicate:
            x[5] = x[4]
        return x

    for duplicate, seed in itertools.product((True, False), range(3)):
        frames = video(duplicate, seed)
        assert temporal_windows(frames.mean(dim=1), 4, 2) == [2, 2, 2, 2]
        sel = vcast.select(frames, 1.0, method=METHOD, temporal_segment_ratio=0.5, dpc_k=2)
        if duplicate:
            assert sel.budgets.tolist() == [16, 16, 16, 16, 16, 0, 16, 16]
            assert torch.allclose(sel.tokens[64:80], frames[4])
        else:
            assert sel.budgets.tolist() == [16] * 8
            assert torch.equal(sel.tokens, frames.reshape(-1, 32))


def test_single_frame_window_even_at_lowest_tau() -> None:
    # A one-frame window has no pairwise cosine (official: NaN, never static); its tokens stay
    # its own even with tau = -1 and identical tokens.
    frames = torch.ones(1, 5, 4)
    sel = vcast.select(frames, 1.0, method=METHOD, tau=-1.0)
    assert sel.keep.tolist() == [0, 1, 2, 3, 4]
    assert torch.equal(sel.tokens, frames[0])


# --- budget apportionment and clustering ---------------------------------------------------------

def test_group_apportionment_known_answers() -> None:
    # Largest remainder, ties to the earlier group.
    assert proportional_quotas([1, 1, 1], 2) == [1, 1, 0]
    assert proportional_quotas([16, 4, 4, 4, 4], 20) == [10, 3, 3, 2, 2]
    # Fits: kept whole.
    assert group_quotas([3, 4], 10, 14) == [3, 4]
    # Groups of <= 14 stay whole; the other 30 tokens go 12 / 18 to the groups of 20 and 30.
    assert group_quotas([10, 20, 30], 40, 14) == [10, 12, 18]
    # The small groups alone (22) exceed the budget: everything proportional (S = 52).
    assert group_quotas([10, 12, 30], 20, 14) == [4, 5, 11]
    for sizes, total in (([5, 0, 17, 3, 40], 33), ([7] * 9, 50), ([1, 2, 3, 100], 1)):
        for small in (0, 5, 14):
            quotas = group_quotas(sizes, total, small)
            assert sum(quotas) == total
            assert all(0 <= q <= s for q, s in zip(quotas, sizes))


def window_with_small_dynamic_sets() -> torch.Tensor:
    """T = 4, P = 20: locations 0..15 static (shared vector + 0.01 noise), 16..19 random per frame."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(4, 20, 32, generator=g)
    x[:, :16] = torch.randn(16, 32, generator=g) + 0.01 * x[:, :16]
    return x


def test_small_groups_are_not_clustered() -> None:
    frames = window_with_small_dynamic_sets()
    # 16 static + 4 x 4 dynamic = 32 tokens > B = 20. The dynamic sets (4 <= 14) stay whole;
    # the static set is clustered into the remaining 4 tokens in frame 0.
    sel = vcast.select(frames, 0.25, method=METHOD)
    assert sel.keep.numel() == 20
    assert sel.budgets.tolist() == [8, 4, 4, 4]
    dynamic = torch.tensor([t * 20 + i for t in range(4) for i in range(16, 20)])
    assert set(dynamic.tolist()) <= set(sel.keep.tolist())
    rows = torch.searchsorted(sel.keep, dynamic)
    assert torch.equal(sel.tokens[rows], frames[:, 16:].reshape(-1, 32))
    assert all(k < 16 for k in sel.keep.tolist() if k not in set(dynamic.tolist()))
    # Without the threshold every group is cut in proportion: quotas 10 / 3 / 3 / 2 / 2.
    plain = vcast.select(frames, 0.25, method=METHOD, min_cluster_tokens=0)
    assert plain.budgets.tolist() == [13, 3, 2, 2]
    assert int((plain.keep < 16).sum()) == 10


def test_dynamic_clusters_are_pair_means_at_a_member() -> None:
    # One frame of four tight, well separated pairs: r = 0.5 clusters them into their pairs
    # (dpc_k = 2: the density neighbourhood is the token and its partner).
    layouts = ([0, 1, 2, 3, 1, 0, 3, 2], [0, 0, 1, 1, 2, 2, 3, 3], [3, 1, 1, 0, 2, 3, 0, 2])
    for seed, layout in enumerate(layouts):
        g = torch.Generator().manual_seed(seed)
        centres = 5.0 * torch.randn(4, 16, generator=g)
        order = torch.tensor(layout)  # pair label of each location
        frames = (centres[order] + 0.01 * torch.randn(8, 16, generator=g))[None]
        sel = vcast.select(frames, 0.5, method=METHOD, min_cluster_tokens=0, dpc_k=2)
        assert sel.keep.numel() == 4
        # Each output is the mean of a pair and sits at one of that pair's locations.
        for position, token in zip(sel.keep.tolist(), sel.tokens):
            members = (order == order[position]).nonzero().flatten()
            assert torch.allclose(token, frames[0, members].mean(dim=0), atol=1e-6)
        assert sorted(int(order[k]) for k in sel.keep) == [0, 1, 2, 3]


def test_zero_budget() -> None:
    sel = vcast.select(torch.randn(2, 2, 4), 0.2, method=METHOD)  # floor(0.8) = 0
    assert sel.keep.numel() == 0 and sel.tokens.shape == (0, 4)


# --- validation ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "name,value",
    [
        ("tau", 1.5),
        ("tau", float("nan")),
        ("tau", "high"),
        ("temporal_segment_ratio", 0.0),
        ("temporal_segment_ratio", 1.5),
        ("dpc_k", 0),
        ("dpc_k", 2.5),
        ("min_cluster_tokens", -1),
        ("min_cluster_tokens", True),
    ],
)
def test_bad_parameters(name: str, value) -> None:
    with pytest.raises(ValueError, match=name):
        vcast.select(torch.randn(4, 6, 8), 0.5, method=METHOD, **{name: value})


def test_takes_no_model_inputs() -> None:
    assert vcast.registry.method_inputs(METHOD) == ()
    with pytest.raises(ValueError, match="vision_attention"):
        vcast.select(torch.randn(4, 6, 8), 0.5, method=METHOD, vision_attention=torch.ones(4, 6))


# variant="official": Visual-AI/PruneVid@b12600c merge_frames_dynamic (our own known answers) ------


def test_official_variant_is_registered_and_others_refused() -> None:
    assert vcast.method_variants(METHOD) == ("paper", "official")
    with pytest.raises(ValueError, match="'fancy'"):
        vcast.select(torch.randn(8, 4, 3), 0.5, method=METHOD, variant="fancy")


def two_scene_video(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[8, 4, 3]: frames 0-3 all equal A, frames 4-7 all equal B (far apart)."""
    a = torch.tensor([[1.0, 2, 3], [-1, 0, 2], [3, 1, 0], [0, 0, 1]])
    return torch.cat([a.expand(4, 4, 3), (-5 * a).expand(4, 4, 3)]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_official_two_static_scenes_by_hand(dtype: torch.dtype) -> None:
    """int(8 * 0.25) = 2 temporal clusters: the two scenes (identical frames tie in density, the noise
    only picks which of them is the centre), windows [4, 4]; every location is static (cosine 1 > 0.8),
    4 static tokens per window (<= 14: not clustered), the mean of 4 equal tokens is the token; no
    dynamic token. Output [A, B] at slots frame 0 patches 0-3, frame 4 patches 0-3, in the input dtype.
    At ratio 0.125 the official output is the same (groups of <= 14 are never clustered) while the
    paper variant keeps floor(0.125 * 32) = 4 (a fixed budget)."""
    video = two_scene_video(dtype)
    sel = vcast.select(video, 0.5, method=METHOD, variant="official")
    assert sel.keep.tolist() == [0, 1, 2, 3, 16, 17, 18, 19]
    assert sel.tokens.dtype == dtype and torch.equal(sel.tokens, torch.cat([video[0], video[4]]))
    assert sel.budgets.tolist() == [4, 0, 0, 0, 4, 0, 0, 0]
    assert torch.equal(vcast.select(video, 0.125, method=METHOD, variant="official").keep, sel.keep)
    assert vcast.select(video, 0.125, method=METHOD).keep.numel() == 4


def test_official_single_frame_window_quirk_by_hand() -> None:
    """W = 1 divides by W (W - 1) = 0. Token (3, -3, -3): float32 unit 0.57735026 each, self-cosine
    rounds to 1 + 2^-23, (1 + 2^-23 - 1) / 0 = +inf > tau: STATIC. bf16: norm sqrt(27) -> 5.1875,
    3 / 5.1875 = 0.5783 -> 0.578125, 3 * 0.578125^2 = 1.00269 -> 1.0, (1 - 1) / 0 = NaN: dynamic.
    Token (4, -4, -2): bf16 units (0.66796875, -0.66796875, -0.333984375), self-cosine 1.00391 -> 1.0078125:
    +inf, static."""
    window = torch.tensor([[[3.0, -3, -3], [4, -4, -2]]])
    assert window_similarity(window).tolist() == [math.inf, math.inf]
    sim16 = window_similarity(window.bfloat16())
    assert math.isnan(sim16[0].item()) and sim16[1].item() == math.inf


def test_official_two_frame_similarity_by_hand() -> None:
    """W = 2, unit tokens (1, 0) and (0.6, 0.8): cos 0.6; (1 + 0.6 - 1) + (0.6 + 1 - 1) = 1.2, / 2 = 0.6."""
    window = torch.tensor([[[1.0, 0.0]], [[0.6, 0.8]]])
    assert window_similarity(window).item() == pytest.approx(0.6, abs=1e-6)


def test_official_bf16_sums_flip_a_location_to_dynamic() -> None:
    """Frames (1, 0) and (4, 3) in bf16: unit (0.8, 0.6) -> (0.80078125, 0.599609375); cosines
    c_uv = 0.80078125, c_vv = 1.00078 -> 1.0. Per frame 1 + 0.80078125 = 1.80078125 is halfway between
    the bf16 numbers 1.796875 and 1.8046875 -> even: 1.796875; (0.796875 * 2) / 2 = 0.796875 < 0.8:
    dynamic. The same cosines summed in float32 give 0.80078125 > 0.8: static (float32 input: 0.8,
    not above tau either way)."""
    window = torch.tensor([[[1.0, 0.0]], [[4.0, 3.0]]])
    assert window_similarity(window.bfloat16()).item() == 0.796875
    assert window_similarity(window).item() == pytest.approx(0.8, abs=1e-6)


def test_official_cluster_means_in_the_input_dtype_by_hand() -> None:
    """One cluster of 1, 2, 4: the one-hot product sums to 7, / 3. float32: 7/3; bf16: 7/3 = 2.3333
    -> 2.328125 (8 significant bits), not bf16 of the float32 mean of bf16 inputs computed otherwise."""
    x = torch.tensor([[1.0], [2.0], [4.0]])
    labels = torch.zeros(3, dtype=torch.long)
    assert cluster_vectors(x, labels, 1).item() == pytest.approx(7 / 3, rel=1e-7)
    assert cluster_vectors(x.bfloat16(), labels, 1).item() == 2.328125


@pytest.mark.parametrize("count, ratio, expected", [(14, 0.5, 14), (15, 0.5, 7), (100, 0.29, 28), (16, 0.5, 8)])
def test_official_group_counts(count: int, ratio: float, expected: int) -> None:
    """<= 14 tokens: kept whole; else int(n * cluster_ratio), a truncated float product
    (100 * 0.29 = 28.999999999999996 -> 28; the paper variant's exact decimal would give 29)."""
    tokens = torch.randn(count, 4, generator=torch.Generator().manual_seed(count))
    assert merge_group(tokens, ratio, 14, 7, torch.Generator().manual_seed(0)).shape == (expected, 4)


def test_official_slots_encode_the_groups_for_stage_b() -> None:
    """P = 10: a window starting at frame 0 with 2 static and 3 dynamic outputs per frame: frame 0 holds
    patches 0, 1 (static) and 7, 8, 9 (dynamic), frame 1 patches 7-9; a gapless frame is one group."""
    frames = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    patches = torch.tensor([0, 1, 7, 8, 9, 7, 8, 9, 0, 1, 2])
    assert read_groups(frames, patches).tolist() == [True, True] + [False] * 9


def test_official_slots_on_a_mixed_video() -> None:
    """Even locations static, odd ones moving (P = 36, D = 24): every frame with outputs has them at
    patches 0.. (static, first frame of a window) and P-d..P-1 (dynamic), ascending, in the input dtype."""
    video = mixed_video(8, 36, 24, seed=2)
    for dtype in (torch.float32, torch.bfloat16):
        sel = vcast.select(video.to(dtype), 0.5, method=METHOD, variant="official")
        assert sel.tokens.dtype == dtype and torch.all(sel.keep[1:] > sel.keep[:-1])
        static = read_groups(sel.keep // 36, sel.keep % 36)
        assert 0 < int(static.sum()) < sel.keep.numel()
        # 18 static locations -> int(18 * 0.5) = 9 per window; 18 dynamic -> 9 per frame
        assert int(static.sum()) % 9 == 0 and sel.budgets.max() <= 18


def test_official_is_deterministic_per_seed_and_leaves_the_global_rng_alone() -> None:
    video = mixed_video(8, 36, 24, seed=5)
    state = torch.random.get_rng_state()
    first = vcast.select(video, 0.5, method=METHOD, variant="official", seed=3)
    again = vcast.select(video, 0.5, method=METHOD, variant="official", seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(first.keep, again.keep) and torch.equal(first.tokens, again.tokens)
    with pytest.raises(ValueError, match="seed"):
        vcast.select(video, 0.5, method=METHOD, variant="official", seed=-1)
