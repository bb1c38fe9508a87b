"""DyCoke TTM baseline (baselines/dycoke.py): DyCoke's own kept count, pairs/quads, edge cases."""

from __future__ import annotations

import math

import pytest
import torch

import vcast


def _video(num_frames: int, tokens_per_frame: int, dim: int = 32, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(num_frames, tokens_per_frame, dim, generator=generator)


def _frame_positions(frame: int, tokens_per_frame: int, tokens) -> list[int]:
    return [frame * tokens_per_frame + i for i in tokens]


# (T, P, r, n, whole frames, expected count). n = floor(r * P); whole = the even frames that are
# not re-reduced by the quad step (t % 4 == 2 and t < T - 2) and not the last frame of an odd T.
COUNT_CASES = [
    (8, 16, 0.25, 4, [0, 4, 6], 3 * 16 + 5 * 4),  # 68
    (5, 49, 0.15, 7, [0], 49 + 4 * 7),  # 77; frame 2 quad-reduced, frame 4 (odd T) reduced
    (12, 30, 0.35, 10, [0, 4, 8, 10], 4 * 30 + 8 * 10),  # 200
    (3, 7, 0.5, 3, [0], 7 + 2 * 3),  # 13; frame 2 reduced against frame 1
    (4, 10, 0.5, 5, [0, 2], 2 * 10 + 2 * 5),  # 30; T <= 4: no quad step
    (32, 196, 0.25, 49, [0, 4, 8, 12, 16, 20, 24, 28, 30], 9 * 196 + 23 * 49),  # 2891
]


@pytest.mark.parametrize("T,P,r,n,whole,expected", COUNT_CASES)
def test_kept_count_and_budgets(T, P, r, n, whole, expected):
    sel = vcast.select(_video(T, P), r, method="dycoke")
    assert sel.keep.numel() == expected
    assert int(sel.budgets.sum()) == expected
    assert sel.budgets.tolist() == [P if t in whole else n for t in range(T)]
    assert torch.equal(sel.keep, torch.unique(sel.keep))  # ascending and unique
    assert torch.equal(sel.mask().sum(1), sel.budgets)
    assert sel.tokens is None  # pure pruning
    # DyCoke keeps more than floor(r * T * P) (its anchor frames stay whole).
    assert expected >= math.floor(r * T * P)


def test_share_at_32_frames_matches_design_table():
    # inllm_methods.md 8.1: F=32 -> 78.4% (K=0.3), 64.1% (K=0.5), 49.4% (K=0.7), 28.1% (K=1.0);
    # the VidCom2 mapping K = 1 - r at r = 0.25 keeps ~46%.
    x = _video(32, 196, dim=8)
    total = 32 * 196
    shares = {k: vcast.select(x, 0.25, method="dycoke", k=k).keep.numel() / total for k in (0.3, 0.5, 0.7, 1.0)}
    assert [round(100 * shares[k], 1) for k in (0.3, 0.5, 0.7, 1.0)] == [78.4, 64.1, 49.4, 28.1]
    default = vcast.select(x, 0.25, method="dycoke").keep.numel()
    assert default == 2891 and abs(default / total - 0.461) < 1e-3


def test_table_share_at_16_frames():
    # F=16, K=0.7: whole frames 0, 4, 8, 12, 14; n = floor(0.3 * 196) = 58 -> 51.6%.
    sel = vcast.select(_video(16, 196, dim=8), 0.5, method="dycoke", k=0.7)
    assert sel.keep.numel() == 5 * 196 + 11 * 58
    assert round(100 * sel.keep.numel() / (16 * 196), 1) == 51.6


def test_k_overrides_ratio_and_extremes():
    x = _video(8, 16)
    a = vcast.select(x, 0.1, method="dycoke", k=0.5)
    b = vcast.select(x, 0.9, method="dycoke", k=0.5)
    assert torch.equal(a.keep, b.keep)
    assert a.budgets.tolist() == [16, 8, 8, 8, 16, 8, 16, 8]
    assert vcast.select(x, 0.25, method="dycoke", k=0.0).keep.numel() == 8 * 16  # nothing pruned
    only_anchors = vcast.select(x, 0.25, method="dycoke", k=1.0)
    assert only_anchors.budgets.tolist() == [16, 0, 0, 0, 16, 0, 16, 0]


def test_keep_count_uses_decimal_values():
    # (1 - 0.9) * 10 = 0.999... in binary floats; the decimal value gives n = 1.
    sel = vcast.select(_video(2, 10), 0.5, method="dycoke", k=0.9)
    assert sel.budgets.tolist() == [10, 1]
    # r = 0.29, P = 100: floor(29.0) = 29, not 28.
    assert vcast.select(_video(2, 100), 0.29, method="dycoke").budgets.tolist() == [100, 29]


def test_deterministic():
    x = _video(9, 20)
    assert torch.equal(vcast.select(x, 0.3, method="dycoke").keep, vcast.select(x, 0.3, method="dycoke").keep)


def test_single_frame_kept_whole():
    sel = vcast.select(_video(1, 12), 0.25, method="dycoke")
    assert sel.keep.tolist() == list(range(12))
    assert sel.budgets.tolist() == [12]


@pytest.mark.parametrize("P,n", [(1, 0), (2, 1), (3, 1)])
def test_tiny_frames(P, n):
    # T = 4: frames 0 and 2 whole, frames 1 and 3 keep floor(0.5 * P).
    sel = vcast.select(_video(4, P), 0.5, method="dycoke")
    assert sel.budgets.tolist() == [P, n, P, n]
    assert sel.keep.numel() == 2 * P + 2 * n


def test_bf16_same_as_float32_upcast():
    x = _video(10, 30).to(torch.bfloat16)
    low = vcast.select(x, 0.3, method="dycoke")
    high = vcast.select(x.float(), 0.3, method="dycoke")
    assert torch.equal(low.keep, high.keep)
    assert low.keep.numel() == 3 * 30 + 7 * 9  # whole frames 0, 4, 8; n = 9


def test_changed_tokens_of_a_copied_frame_are_kept():
    # Frame 1 is frame 0 except four tokens: n = floor(0.25 * 16) = 4 keeps exactly those.
    x = _video(2, 16)
    changed = [3, 7, 10, 14]
    x[1] = x[0]
    x[1, changed] = _video(1, 4, seed=5)[0]
    sel = vcast.select(x, 0.25, method="dycoke")
    assert sel.keep.tolist() == list(range(16)) + _frame_positions(1, 16, changed)


def test_changed_tokens_come_first_then_lower_index():
    # Unchanged tokens are one repeated vector (exact cosine ties): after the changed token, the
    # ties go to the lowest indices.
    v = torch.randn(8, generator=torch.Generator().manual_seed(1))
    x = v.expand(2, 10, 8).clone()
    x[1, 6] = -v
    sel = vcast.select(x, 0.3, method="dycoke")  # n = 3
    assert sel.keep.tolist() == list(range(10)) + _frame_positions(1, 10, [0, 1, 6])


def test_quad_step_reduces_against_frame_i():
    # T = 8: frame 2 is re-reduced against frame 0 (not frame 1), frame 3 against frame 2, frame
    # 1 against frame 0. Each reduced frame copies its reference except four planted tokens.
    T, P = 8, 16
    x = _video(T, P, seed=3)
    plants = {1: (0, [2, 5, 8, 11]), 2: (0, [1, 5, 9, 13]), 3: (2, [0, 2, 4, 6]), 5: (4, [15, 14, 3, 7])}
    for frame, (ref, tokens) in plants.items():
        noise = _video(1, len(tokens), seed=10 + frame)[0]
        x[frame] = x[ref]
        x[frame, tokens] = noise
    sel = vcast.select(x, 0.25, method="dycoke")
    mask = sel.mask()
    for frame, (_, tokens) in plants.items():
        assert torch.nonzero(mask[frame]).flatten().tolist() == sorted(tokens), frame
    assert mask[[0, 4, 6]].all()  # anchors whole
    assert sel.budgets.tolist() == [16, 4, 4, 4, 16, 4, 16, 4]


def test_odd_last_frame_reduced_against_predecessor():
    # T = 3: the official code drops frame 2; here it keeps the n tokens least similar to frame 1.
    x = _video(3, 12, seed=4)
    x[2] = x[1]
    x[2, [2, 9, 10]] = _video(1, 3, seed=8)[0]
    sel = vcast.select(x, 0.25, method="dycoke")  # n = 3
    assert sel.budgets.tolist() == [12, 3, 3]
    assert torch.nonzero(sel.mask()[2]).flatten().tolist() == [2, 9, 10]


@pytest.mark.parametrize("T", [2, 3, 4, 5, 6, 7])
def test_short_videos_do_not_crash(T):
    sel = vcast.select(_video(T, 8), 0.5, method="dycoke")
    whole = {2: [0], 3: [0], 4: [0, 2], 5: [0], 6: [0, 4], 7: [0, 4]}[T]
    assert sel.budgets.tolist() == [8 if t in whole else 4 for t in range(T)]


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), float("inf"), "0.5", True])
def test_bad_k(bad):
    with pytest.raises(ValueError, match="k must"):
        vcast.select(_video(4, 8), 0.5, method="dycoke", k=bad)


def test_unknown_parameter_and_registration():
    assert vcast.registry.method_inputs("dycoke") == ()
    assert vcast.method_params("dycoke") == {"k": None}
    with pytest.raises(ValueError, match="threshold"):
        vcast.select(_video(4, 8), 0.5, method="dycoke", threshold=0.5)
