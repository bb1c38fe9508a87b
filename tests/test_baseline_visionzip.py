"""VisionZip (video, HoliTom's per-frame adaptation): counts, determinism, edge sizes, dtypes,
known answers for the dominant / contextual split and the merge, budgets, validation."""

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
