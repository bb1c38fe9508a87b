"""VisionZip (video). variant="paper": counts, determinism, edge sizes, dtypes, known answers for
the dominant / contextual split and the merge, budgets, validation. variant="official" (HoliTom's
adaptation) and "vidcom2_qwen" (VidCom2's Qwen port): hand-computed known answers, bf16
arithmetic, output order, the L2-norm proxy, counts, refusals."""

from __future__ import annotations

import pytest
import torch

import vcast
from vcast.synthetic_features import synthetic_video_features

SHAPES = [(8, 16, 0.25, 32), (5, 49, 0.15, 36), (12, 30, 0.35, 126), (3, 7, 0.5, 10)]  # K = floor(r T P)


def inputs(num_frames: int, tokens_per_frame: int, dim: int = 12, seed: int = 0, key_dim: int = 5):
    generator = torch.Generator().manual_seed(seed)
    frames = torch.randn(num_frames, tokens_per_frame, dim, generator=generator)
    attention = torch.rand(num_frames, tokens_per_frame, generator=generator)
    keys = torch.randn(num_frames, tokens_per_frame, key_dim, generator=generator)
    return frames, attention, keys


def check_selection(sel: vcast.Selection, num_frames: int, tokens_per_frame: int, dim: int, expected: int) -> None:
    assert sel.keep.numel() == expected
    assert int(sel.budgets.sum()) == expected
    assert sel.budgets.shape == (num_frames,)
    assert bool((sel.keep[1:] > sel.keep[:-1]).all())  # ascending and unique
    per_frame = torch.bincount(sel.keep // tokens_per_frame, minlength=num_frames)
    assert torch.equal(per_frame, sel.budgets)
    assert sel.tokens is not None and sel.tokens.shape == (expected, dim)
    assert sel.tokens.dtype == torch.float32


@pytest.mark.parametrize("temporal", ["uniform", "curvature"])
@pytest.mark.parametrize("num_frames, tokens_per_frame, ratio, expected", SHAPES)
def test_exact_count(num_frames, tokens_per_frame, ratio, expected, temporal):
    frames, attention, keys = inputs(num_frames, tokens_per_frame)
    sel = vcast.select(frames, ratio, method="visionzip", temporal=temporal, vision_attention=attention,
                       vision_keys=keys)
    check_selection(sel, num_frames, tokens_per_frame, 12, expected)


def test_uniform_budgets_are_equal_up_to_one_earliest_first():
    frames, attention, keys = inputs(5, 49)
    sel = vcast.select(frames, 0.15, method="visionzip", vision_attention=attention, vision_keys=keys)
    assert sel.budgets.tolist() == [8, 7, 7, 7, 7]  # 36 = 5 * 7 + 1, the extra to frame 0


def test_fewer_tokens_than_frames_leaves_late_frames_empty():
    frames, attention, keys = inputs(8, 4)
    sel = vcast.select(frames, 0.2, method="visionzip", vision_attention=attention, vision_keys=keys)
    assert sel.budgets.tolist() == [1, 1, 1, 1, 1, 1, 0, 0]  # B = floor(6.4) = 6 < T: k_min = 0


def test_deterministic():
    frames, attention, keys = inputs(6, 20)
    first = vcast.select(frames, 0.3, method="visionzip", vision_attention=attention, vision_keys=keys)
    second = vcast.select(frames, 0.3, method="visionzip", vision_attention=attention, vision_keys=keys)
    assert torch.equal(first.keep, second.keep)
    assert torch.equal(first.tokens, second.tokens)


@pytest.mark.parametrize("tokens_per_frame", [1, 2, 3])
@pytest.mark.parametrize("ratio", [0.34, 0.5, 1.0])
def test_single_frame_tiny_grid(tokens_per_frame, ratio):
    frames, attention, keys = inputs(1, tokens_per_frame)
    expected = int(ratio * tokens_per_frame)  # floor; no product here lands on a float boundary
    sel = vcast.select(frames, ratio, method="visionzip", vision_attention=attention, vision_keys=keys)
    check_selection(sel, 1, tokens_per_frame, 12, expected)


def test_bf16_matches_float32_upcast():
    frames, attention, _ = inputs(6, 25, dim=16, seed=3)
    low = frames.bfloat16()
    sel_low = vcast.select(low, 0.3, method="visionzip", vision_attention=attention.bfloat16())
    sel_up = vcast.select(low.float(), 0.3, method="visionzip", vision_attention=attention.bfloat16().float())
    assert sel_low.keep.numel() == sel_up.keep.numel() == 45
    assert torch.equal(sel_low.keep, sel_up.keep)
    assert sel_low.tokens.dtype == torch.float32
    torch.testing.assert_close(sel_low.tokens, sel_up.tokens)


def test_ratio_one_returns_the_input():
    # b = P: every non-dominant token is a target and nothing is assigned, so nothing changes.
    frames, attention, keys = inputs(4, 10)
    sel = vcast.select(frames, 1.0, method="visionzip", vision_attention=attention, vision_keys=keys)
    assert torch.equal(sel.keep, torch.arange(40))
    assert torch.equal(sel.tokens, frames.reshape(40, -1))


def test_planted_attention_token_is_kept_unchanged():
    video = synthetic_video_features(num_frames=10, tokens_per_frame=36, dim=24, scene_cuts=(5,), seed=1)
    frames = video.features
    attention = torch.rand(10, 36, generator=torch.Generator().manual_seed(7))
    planted = torch.tensor([(5 * t + 3) % 36 for t in range(10)])
    attention[torch.arange(10), planted] = 5.0
    for temporal in ("uniform", "curvature"):
        sel = vcast.select(frames, 0.1, method="visionzip", temporal=temporal, vision_attention=attention)
        assert int(sel.budgets.min()) >= 2  # b >= 2 -> int(b * 54/64) >= 1 dominant token per frame
        flat = torch.arange(10) * 36 + planted
        rows = torch.searchsorted(sel.keep, flat)
        assert torch.equal(sel.keep[rows], flat)  # kept in every frame
        assert torch.equal(sel.tokens[rows], frames.reshape(-1, 24)[flat])  # as it was


def test_dominant_tokens_are_the_attention_top():
    # dominant_ratio = 1: pure pruning by attention, ties to the lower index.
    frames, attention, keys = inputs(3, 8)
    attention[0] = torch.tensor([0.1, 0.5, 0.5, 0.2, 0.5, 0.0, 0.3, 0.4])
    sel = vcast.select(frames, 0.375, method="visionzip", dominant_ratio=1.0, vision_attention=attention,
                       vision_keys=keys)
    assert sel.keep[:3].tolist() == [1, 2, 4]  # three 0.5s
    for t in range(3):
        top = torch.sort(attention[t], descending=True, stable=True).indices[:3]
        assert sel.keep[3 * t : 3 * t + 3].tolist() == sorted((top + 8 * t).tolist())
    assert torch.equal(sel.tokens, frames.reshape(24, -1)[sel.keep])


def hand_built_frame():
    """P = 14, r = 0.5 -> b = 7 = 5 dominant (int(7 * 54/64)) + 2 contextual.

    Tokens 9..13 have the top attention, so the remaining ones are 0..8 (N_rem = 9); step = 9 // 2
    = 4, targets 0 and 4. Keys: 1, 2, 3 point along target 0's key, 5..8 along target 4's.
    """
    frames = torch.randn(1, 14, 3, generator=torch.Generator().manual_seed(11))
    attention = torch.zeros(1, 14)
    attention[0, 9:] = 1.0
    keys = torch.zeros(1, 14, 2)
    keys[0, 0] = torch.tensor([1.0, 0.0])
    keys[0, 4] = torch.tensor([0.0, 1.0])
    keys[0, 1:4] = torch.tensor([[1.0, 0.1], [2.0, 0.3], [1.0, -0.2]])
    keys[0, 5:9] = torch.tensor([[0.1, 1.0], [-0.2, 3.0], [0.3, 1.0], [0.0, 0.5]])
    return frames, attention, keys


def test_contextual_token_is_target_plus_mean_of_assigned():
    frames, attention, keys = hand_built_frame()
    x = frames[0]
    sel = vcast.select(frames, 0.5, method="visionzip", vision_attention=attention, vision_keys=keys)
    assert sel.keep.tolist() == [0, 4, 9, 10, 11, 12, 13]
    torch.testing.assert_close(sel.tokens[0], x[0] + x[1:4].mean(0))
    torch.testing.assert_close(sel.tokens[1], x[4] + x[5:9].mean(0))
    assert torch.equal(sel.tokens[2:], x[9:])

    mean = vcast.select(frames, 0.5, method="visionzip", merge="mean", vision_attention=attention, vision_keys=keys)
    torch.testing.assert_close(mean.tokens[0], x[0:4].mean(0))
    torch.testing.assert_close(mean.tokens[1], x[4:9].mean(0))


def test_assignment_follows_keys_not_tokens():
    frames, attention, keys = hand_built_frame()
    swapped = keys.clone()
    swapped[0, [1, 5]] = keys[0, [5, 1]]  # token 1 now goes to target 4, token 5 to target 0
    x = frames[0]
    sel = vcast.select(frames, 0.5, method="visionzip", vision_attention=attention, vision_keys=swapped)
    torch.testing.assert_close(sel.tokens[0], x[0] + x[[2, 3, 5]].mean(0))
    torch.testing.assert_close(sel.tokens[1], x[4] + x[[1, 6, 7, 8]].mean(0))


def test_without_keys_the_tokens_are_the_metric():
    _, attention, keys = hand_built_frame()
    frames = torch.cat([keys, torch.zeros(1, 14, 1)], dim=2) * 3.0  # tokens along the same directions
    x = frames[0]
    sel = vcast.select(frames, 0.5, method="visionzip", vision_attention=attention)
    torch.testing.assert_close(sel.tokens[0], x[0] + x[1:4].mean(0))
    torch.testing.assert_close(sel.tokens[1], x[4] + x[5:9].mean(0))


def test_target_without_assigned_tokens_stays_itself():
    # P = 5, b = 4 (r = 0.8): dominant int(3.375) = 3, c = 1; force 4 targets via dominant_ratio = 0:
    # N_rem = 5, c = 4, step = 1, targets 0..3; token 4 joins the target with the parallel key.
    frames = torch.randn(1, 5, 3, generator=torch.Generator().manual_seed(2))
    keys = torch.eye(4)[[0, 1, 2, 3, 2]][None]
    sel = vcast.select(frames, 0.8, method="visionzip", dominant_ratio=0.0, vision_attention=torch.rand(1, 5),
                       vision_keys=keys)
    x = frames[0]
    assert sel.keep.tolist() == [0, 1, 2, 3]
    torch.testing.assert_close(sel.tokens[[0, 1, 3]], x[[0, 1, 3]])
    torch.testing.assert_close(sel.tokens[2], x[2] + x[4])


@pytest.mark.parametrize("ratio", [0.1, 0.25, 0.37])
def test_curvature_budgets_match_vcast(ratio):
    video = synthetic_video_features(num_frames=16, tokens_per_frame=40, dim=32, scene_cuts=(6, 11), seed=4)
    attention = torch.rand(16, 40, generator=torch.Generator().manual_seed(0))
    sel = vcast.select(video.features, ratio, method="visionzip", temporal="curvature", vision_attention=attention)
    reference = vcast.select(video.features, ratio, method="vcast")
    assert torch.equal(sel.budgets, reference.budgets)
    uniform = vcast.select(video.features, ratio, method="visionzip", vision_attention=attention)
    assert not torch.equal(sel.budgets, uniform.budgets)  # the curvature actually moves budget
    assert int(uniform.budgets.max() - uniform.budgets.min()) <= 1


def test_missing_attention_raises():
    frames, _, keys = inputs(2, 6)
    with pytest.raises(ValueError, match="vision_attention"):
        vcast.select(frames, 0.5, method="visionzip", vision_keys=keys)


@pytest.mark.parametrize("shape", [(2, 5), (3, 6), (12,), (2, 6, 1)])
def test_misshaped_attention_raises(shape):
    frames, _, _ = inputs(2, 6)
    with pytest.raises(ValueError, match="vision_attention"):
        vcast.select(frames, 0.5, method="visionzip", vision_attention=torch.rand(*shape))


@pytest.mark.parametrize("shape", [(2, 5, 4), (1, 6, 4), (2, 6), (2, 6, 0)])
def test_misshaped_keys_raise(shape):
    frames, attention, _ = inputs(2, 6)
    with pytest.raises(ValueError, match="vision_keys"):
        vcast.select(frames, 0.5, method="visionzip", vision_attention=attention, vision_keys=torch.rand(*shape))


@pytest.mark.parametrize("name, value", [("temporal", "random"), ("tau", 0.0), ("tau", -1.0), ("merge", "max"),
                                         ("dominant_ratio", 1.5), ("dominant_ratio", -0.1),
                                         ("dominant_ratio", "0.5")])
def test_bad_parameter_raises(name, value):
    frames, attention, keys = inputs(2, 6)
    with pytest.raises(ValueError, match=name):
        vcast.select(frames, 0.5, method="visionzip", vision_attention=attention, vision_keys=keys, **{name: value})


def test_registered_inputs():
    assert vcast.registry.method_inputs("visionzip") == ("vision_attention", "vision_keys")


# --- variant="official": HoliTom's video adaptation, bit for bit, in the input dtype -----------------

def official(frames, ratio=0.5, **params):
    return vcast.select(frames, ratio, method="visionzip", variant="official", **params)


def test_official_output_order_is_dominant_then_contextual():
    # s = round(0.5 * 14) = 7 -> 5 dominant + 2 contextual, as in hand_built_frame. The slots are the
    # frame's sorted kept indices; row k is the release's k-th output: [x9..x13, ctx(0), ctx(4)].
    frames, attention, keys = hand_built_frame()
    x = frames[0]
    sel = official(frames, vision_attention=attention, vision_keys=keys)
    assert sel.keep.tolist() == [0, 4, 9, 10, 11, 12, 13]
    assert sel.budgets.tolist() == [7]
    assert torch.equal(sel.tokens[:5], x[9:])
    torch.testing.assert_close(sel.tokens[5], x[0] + x[1:4].mean(0))
    torch.testing.assert_close(sel.tokens[6], x[4] + x[5:9].mean(0))
    assert sel.frame_weights is None


def grid_frame():
    """P = 4 (a 2 x 2 grid), s = 3: int(3 * 54/64) = 2 dominant, 1 contextual.

    topk(2) of [0.1, 0.5, 0.2, 0.9] is [3, 1] (value order); the rest [0, 2] get step 2 -> target 0,
    and token 2 merges into it: contextual = x0 + x2.
    """
    frames = torch.arange(1.0, 13.0).view(1, 4, 3)
    attention = torch.tensor([[0.1, 0.5, 0.2, 0.9]])
    keys = torch.ones(1, 4, 2)
    return frames, attention, keys


def test_official_grid_mode_reproduces_the_dominant_token_misplacement():
    frames, attention, keys = grid_frame()
    x = frames[0]
    flat = official(frames, spatial_tokens=3, vision_attention=attention, vision_keys=keys)
    assert flat.keep.tolist() == [0, 1, 3]
    assert torch.equal(flat.tokens, torch.stack([x[1], x[3], x[0] + x[2]]))
    # grid: positions cat([3, 1], [0]) sorted -> [0, 1, 3] read tokens [ctx, x3, x1]: the index-ordered
    # dominant tokens paired with value-ordered positions, so x1 and x3 swap places (the release's quirk).
    grid = official(frames, spatial_tokens=3, newline_position="grid", vision_attention=attention, vision_keys=keys)
    assert grid.keep.tolist() == [0, 1, 3]
    assert torch.equal(grid.tokens, torch.stack([x[0] + x[2], x[3], x[1]]))


def test_official_spatial_tokens_per_frame_and_default():
    frames, attention, keys = inputs(5, 20)
    sel = official(frames, 0.25, vision_attention=attention, vision_keys=keys)
    assert sel.budgets.tolist() == [5] * 5  # round(0.25 * 20) = 5 in every frame
    sel = official(frames, 0.15, vision_attention=attention, vision_keys=keys)
    assert sel.budgets.tolist() == [3] * 5  # round(3.0) (0.15 * 20 = 3.0000000000000004)
    fixed = official(frames, 0.25, spatial_tokens=8, vision_attention=attention, vision_keys=keys)
    assert fixed.budgets.tolist() == [8] * 5 and fixed.keep.numel() == 40  # SPATIAL_TOKENS wins over r
    whole = official(frames, 0.25, spatial_tokens=50, vision_attention=attention, vision_keys=keys)
    assert whole.budgets.tolist() == [20] * 5  # clamped to P (the release fails)
    tiny = official(frames, 0.01, vision_attention=attention, vision_keys=keys)
    assert tiny.budgets.tolist() == [1] * 5  # at least one token per frame
    # s = 1: no dominant token, one contextual: the first token plus the mean of all others.
    x = frames[0]
    torch.testing.assert_close(tiny.tokens[0], x[0] + x[1:].mean(0))
    assert tiny.keep.tolist() == [20 * t for t in range(5)]


def test_official_dominant_ratio_one_keeps_the_attention_top():
    # The release divides by zero without contextual tokens; here the dominant tokens are returned.
    frames, attention, keys = inputs(2, 8)
    sel = official(frames, 0.5, dominant_ratio=1.0, vision_attention=attention, vision_keys=keys)
    for t in range(2):
        top = attention[t].topk(4).indices.sort().values + 8 * t
        assert sel.keep[4 * t : 4 * t + 4].tolist() == top.tolist()
    assert torch.equal(sel.tokens, frames.reshape(16, -1)[sel.keep])


def assignment_frame(dtype):
    """P = 6, r = 0.7 -> 4 tokens (both variants) with dominant_ratio 0.5: dominant {4, 5}; the rest
    [0, 1, 2, 3] get step 2, targets 0 and 2 with keys (1, 0) and (0, 1). Token 1's key is (1, 1.001):
    closer to target 2 in float32, a tie in bf16 (1.001 rounds to 1.0), where argmax takes the first
    target, 0."""
    frames = torch.zeros(1, 6, 2, dtype=dtype)
    frames[0, :, 0] = torch.tensor([1.0, 10.0, 100.0, 1000.0, 3.0, 4.0])
    attention = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0, 2.0]])
    keys = torch.tensor([[[1.0, 0.0], [1.0, 1.001], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]])
    return frames, attention, keys


def test_official_bf16_arithmetic_changes_the_assignment_and_paper_does_not():
    results = {}
    for variant in ("official", "paper"):
        for dtype in (torch.float32, torch.bfloat16):
            frames, attention, keys = assignment_frame(dtype)
            sel = vcast.select(frames, 0.7, method="visionzip", variant=variant, dominant_ratio=0.5,
                               vision_attention=attention, vision_keys=keys)
            assert sel.keep.tolist() == [0, 2, 4, 5]
            results[variant, dtype] = sel.tokens.float()
    # tokens are [d4, d5, ctx(0), ctx(2)] (official) or by position [ctx(0), ctx(2), d4, d5] (paper)
    assert results["official", torch.float32][2:, 0].tolist() == [1.0, 100.0 + (10.0 + 1000.0) / 2]
    # bf16: token 1 joins target 0; 100 + 1000 = 1100 lies halfway between the bf16 neighbours 1096
    # and 1104 (spacing 8 above 1024) and rounds half to even, to 1104.
    assert results["official", torch.bfloat16][2:, 0].tolist() == [1.0 + 10.0, 1104.0]
    for dtype in (torch.float32, torch.bfloat16):
        assert results["paper", dtype][:2, 0].tolist() == [1.0, 100.0 + (10.0 + 1000.0) / 2]


def test_official_bf16_merge_rounds_in_bf16():
    # One contextual token (s = 1): x0 + mean(x1, x2) with x0 = 1, x1 = 1, x2 = 1 + 2^-7.
    # bf16: the sum 2 + 2^-7 is exact, /2 = 1 + 2^-8 exact, 1 + (1 + 2^-8) = 2 + 2^-8 rounds (half to
    # even) to 2.0. float32 keeps 2.00390625.
    values = torch.tensor([1.0, 1.0, 1.0 + 2**-7])
    attention = torch.zeros(1, 3)
    keys = torch.ones(1, 3, 1)
    for dtype, expected in ((torch.bfloat16, 2.0), (torch.float32, 2.00390625)):
        frames = values.view(1, 3, 1).to(dtype)
        sel = official(frames, 1 / 3, vision_attention=attention, vision_keys=keys)
        assert sel.tokens.dtype == dtype
        assert sel.tokens.float().view(-1).tolist() == [expected]
    paper = vcast.select(values.view(1, 3, 1).bfloat16(), 0.34, method="visionzip", vision_attention=attention,
                         vision_keys=keys)
    assert paper.tokens.dtype == torch.float32 and paper.tokens.view(-1).tolist() == [2.00390625]


def test_official_zero_key_gives_nan_cosines_like_the_release():
    # dominant_ratio 0, s = 2: targets 0 and 2 (step 2). Target 0's key is zero: the release divides
    # by its bare norm, so every cosine with target 0 is NaN and argmax (NaN counts as the maximum)
    # sends tokens 1 and 3 there, although their keys equal target 2's. An epsilon-normalised key would
    # give cosine 0 and send them to target 2 (the paper variant: [1, 4 + (2 + 8) / 2]).
    frames = torch.tensor([[[1.0], [2.0], [4.0], [8.0]]])
    keys = torch.tensor([[[0.0], [-1.0], [-1.0], [-1.0]]])
    attention = torch.zeros(1, 4)
    sel = official(frames, 0.5, dominant_ratio=0.0, vision_attention=attention, vision_keys=keys)
    assert sel.keep.tolist() == [0, 2]
    assert sel.tokens.view(-1).tolist() == [1.0 + (2.0 + 8.0) / 2, 4.0]
    paper = vcast.select(frames, 0.5, method="visionzip", dominant_ratio=0.0, vision_attention=attention,
                         vision_keys=keys)
    assert paper.tokens.view(-1).tolist() == [1.0, 4.0 + (2.0 + 8.0) / 2]


def test_official_without_keys_uses_the_tokens():
    _, attention, keys = hand_built_frame()
    frames = torch.cat([keys, torch.zeros(1, 14, 1)], dim=2) * 3.0
    x = frames[0]
    sel = official(frames, vision_attention=attention)
    torch.testing.assert_close(sel.tokens[5], x[0] + x[1:4].mean(0))
    torch.testing.assert_close(sel.tokens[6], x[4] + x[5:9].mean(0))


def test_official_needs_attention():
    frames, _, keys = inputs(2, 6)
    with pytest.raises(ValueError, match="vision_attention"):
        official(frames, vision_keys=keys)


# --- variant="vidcom2_qwen": VidCom2's Qwen port (L2-norm proxy, kNN density), in the input dtype --------

def qwen(frames, ratio, **params):
    return vcast.select(frames, ratio, method="visionzip", variant="vidcom2_qwen", **params)


def density_frame(dtype=torch.float32):
    """P = 8, r = 0.625: num_keep = 5, dominant = max(1, int(5 * 0.6)) = 3, c = 2.

    Slots 1, 4, 6 have the largest norms (5, 6, 7): the dominant tokens. The rest, slots 0, 2, 3, 5, 7,
    point at 0, 10, 20, 80, 90 degrees; k = 5 > 4 others, so density = mean cosine to the other four:
    0.525, 0.621, 0.692, 0.500, 0.375. Anchors: slots 2 (10 deg) and 3 (20 deg); slot 0 joins slot 2,
    slots 5 and 7 join slot 3 (their cosines to 20 deg are larger).
    """
    angles = torch.tensor([0.0, 10.0, 20.0, 80.0, 90.0]).deg2rad()
    radii = torch.tensor([1.0, 2.0, 1.0, 2.0, 1.5])
    rest = torch.stack([radii * angles.cos(), radii * angles.sin()], dim=1)
    frames = torch.zeros(1, 8, 2)
    frames[0, [0, 2, 3, 5, 7]] = rest
    frames[0, [1, 4, 6]] = torch.tensor([[0.0, -5.0], [-6.0, 0.0], [4.2, -5.6]])  # norms 5, 6, 7
    return frames.to(dtype)


def test_vidcom2_qwen_norm_proxy_and_density_anchors():
    frames = density_frame()
    x = frames[0]
    sel = qwen(frames, 0.625)
    assert sel.keep.tolist() == [1, 2, 3, 4, 6]
    assert sel.budgets.tolist() == [5]
    torch.testing.assert_close(sel.tokens[1], (x[0] + x[2]) / 2)  # plain mean, the anchor included
    torch.testing.assert_close(sel.tokens[2], (x[3] + x[5] + x[7]) / 3)
    assert torch.equal(sel.tokens[[0, 3, 4]], x[[1, 4, 6]])
    assert sel.tokens.dtype == torch.float32 and sel.frame_weights is None


def test_vidcom2_qwen_ignores_vision_attention_and_keys():
    frames = density_frame()
    attention = torch.tensor([[9.0, 0, 0, 0, 0, 0, 0, 8.0]])  # would pick slots 0 and 7
    keys = torch.randn(1, 8, 3, generator=torch.Generator().manual_seed(0))
    plain = qwen(frames, 0.625)
    given = qwen(frames, 0.625, vision_attention=attention, vision_keys=keys)
    assert torch.equal(plain.keep, given.keep) and torch.equal(plain.tokens, given.tokens)


def test_vidcom2_qwen_norm_ranking_picks_dominant_tokens():
    # dominant_ratio = 1: pure pruning by L2 norm, kept in index order.
    frames = torch.zeros(2, 6, 3)
    frames[0, :, 0] = torch.tensor([1.0, -7.0, 3.0, 2.0, -6.0, 0.5])  # norms 1 7 3 2 6 .5
    frames[1, :, 1] = torch.tensor([4.0, 0.1, -0.2, 5.0, 0.3, -9.0])
    sel = qwen(frames, 0.5, dominant_ratio=1.0)
    assert sel.keep.tolist() == [1, 2, 4, 6, 9, 11]
    assert torch.equal(sel.tokens, frames.reshape(12, 3)[sel.keep])


@pytest.mark.parametrize("tokens_per_frame, ratio, keep", [(196, 0.25, 49), (10, 0.05, 1), (10, 0.29, 2),
                                                            (100, 0.29, 28), (7, 1.0, 7), (1, 0.5, 1)])
def test_vidcom2_qwen_counts_truncate(tokens_per_frame, ratio, keep):
    # num_keep = max(1, int(P * r)): 100 * 0.29 = 28.999999999999996 -> 28, as the release.
    frames = torch.randn(3, tokens_per_frame, 4, generator=torch.Generator().manual_seed(1))
    sel = qwen(frames, ratio)
    assert sel.budgets.tolist() == [keep] * 3
    assert bool((sel.keep[1:] > sel.keep[:-1]).all())


def test_vidcom2_qwen_bf16_mean_rounds_in_bf16():
    # Two remaining tokens x0 = (1, 0), x1 = (1 + 2^-7, 0), one anchor (c = 1): both join it, the mean
    # (1 + 2^-8, 0) rounds to (1, 0) in bf16 (half to even); float32 keeps 1.00390625.
    frames = torch.tensor([[[1.0, 0.0], [1.0 + 2**-7, 0.0], [0.0, 8.0]]])
    for dtype, expected in ((torch.bfloat16, 1.0), (torch.float32, 1.00390625)):
        sel = qwen(frames.to(dtype), 2 / 3, dominant_ratio=0.5)  # keep 2: dominant 1 (slot 2) + 1 merged
        assert sel.tokens.dtype == dtype
        merged = sel.tokens[0].float()
        assert merged.tolist() == [expected, 0.0]
        assert sel.keep.tolist() in ([0, 2], [1, 2])  # the anchor: an exact density tie


def test_vidcom2_qwen_single_remaining_token_is_its_own_anchor():
    # P = 2, r = 1: keep 2, dominant 1, one remaining token: density is the mean of nothing (NaN)
    # and that token is the anchor, unchanged.
    frames = torch.tensor([[[3.0, 0.0], [0.0, 1.0]]])
    sel = qwen(frames, 1.0)
    assert sel.keep.tolist() == [0, 1]
    assert torch.equal(sel.tokens, frames[0])


# --- variants in general ---------------------------------------------------------------------------------

def test_registered_variants():
    assert vcast.registry.method_variants("visionzip") == ("paper", "official", "vidcom2_qwen")


def test_unknown_variant_is_named():
    frames, attention, keys = inputs(2, 6)
    with pytest.raises(ValueError, match="'fast'"):
        vcast.select(frames, 0.5, method="visionzip", variant="fast", vision_attention=attention)


@pytest.mark.parametrize("variant, name, value", [
    ("official", "temporal", "curvature"), ("vidcom2_qwen", "temporal", "curvature"), ("official", "merge", "mean"),
    ("paper", "spatial_tokens", 10), ("vidcom2_qwen", "spatial_tokens", 10), ("paper", "newline_position", "grid"),
    ("paper", "k_neighbors", 3), ("official", "k_neighbors", 3), ("official", "newline_position", "rows"),
    ("official", "spatial_tokens", 0), ("vidcom2_qwen", "k_neighbors", 0)])
def test_parameters_of_another_variant_raise(variant, name, value):
    frames, attention, keys = inputs(2, 6)
    with pytest.raises(ValueError, match=name):
        vcast.select(frames, 0.5, method="visionzip", variant=variant, vision_attention=attention,
                     vision_keys=keys, **{name: value})


@pytest.mark.parametrize("variant", ["official", "vidcom2_qwen"])
def test_reproduction_variants_are_deterministic_and_keep_the_dtype(variant):
    frames, attention, keys = inputs(4, 30, seed=5)
    for dtype in (torch.float32, torch.bfloat16):
        first = vcast.select(frames.to(dtype), 0.3, method="visionzip", variant=variant,
                             vision_attention=attention, vision_keys=keys)
        second = vcast.select(frames.to(dtype), 0.3, method="visionzip", variant=variant,
                              vision_attention=attention, vision_keys=keys)
        assert torch.equal(first.keep, second.keep) and torch.equal(first.tokens, second.tokens)
        assert first.tokens.dtype == dtype
        assert bool((first.keep[1:] > first.keep[:-1]).all())
        assert torch.equal(torch.bincount(first.keep // 30, minlength=4), first.budgets)
