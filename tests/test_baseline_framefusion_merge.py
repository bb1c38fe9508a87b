"""FrameFusion's first merge (baselines/framefusion_merge/): count rule, run merging, ties."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import vcast


def _random(num_frames: int, tokens_per_frame: int, dim: int = 64, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(num_frames, tokens_per_frame, dim, generator=generator)


def _near_static(num_frames: int, tokens_per_frame: int, dim: int = 32, seed: int = 0) -> torch.Tensor:
    """Each patch is one vector plus 1% noise: every cosine to the previous frame is ~1."""
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(tokens_per_frame, dim, generator=generator)
    return base + 0.01 * torch.randn(num_frames, tokens_per_frame, dim, generator=generator)


def _num_candidates(x: torch.Tensor, threshold: float) -> int:
    """Independent count of tokens whose cosine to the same patch one frame earlier is >= threshold."""
    return int((F.cosine_similarity(x[1:].double(), x[:-1].double(), dim=-1) >= threshold).sum())


# (T, P, r, expected count) on a near-static video. The cap is floor((1 - r) * N):
#   8*16=128, cap 96 <= 112 candidates -> 32;   12*30=360, cap 234 <= 330 -> 126;
#   3*7=21, cap floor(10.5)=10 <= 14 -> 11 (= ceil(r * N), one above floor(r * N) = 10);
#   5*49=245, cap floor(208.25)=208 > 196 candidates -> all merged: 245 - 196 = 49 (one per patch).
CAP_CASES = [(8, 16, 0.25, 32), (12, 30, 0.35, 126), (3, 7, 0.5, 11), (5, 49, 0.15, 49)]


@pytest.mark.parametrize("T,P,r,expected", CAP_CASES)
def test_count_rule_on_near_static_video(T, P, r, expected):
    x = _near_static(T, P)
    assert _num_candidates(x, 0.6) == (T - 1) * P
    sel = vcast.select(x, r, method="framefusion_merge")
    cap = math.floor((1 - r) * T * P + 1e-9)
    assert expected == (T * P - cap if (T - 1) * P >= cap else P)
    assert sel.keep.numel() == expected and int(sel.budgets.sum()) == expected
    assert torch.equal(sel.keep, torch.unique(sel.keep))
    assert torch.equal(sel.mask().sum(1), sel.budgets)
    assert sel.tokens.shape == (expected, 32) and sel.tokens.dtype == torch.float32
    assert sel.budgets[0] == P  # frame 0 is never merged


def test_merge_all_branch_collapses_each_patch_to_its_mean():
    # T=5, r=0.15: 196 candidates < cap 208, so every patch collapses into frame 0 as its mean.
    x = _near_static(5, 49)
    sel = vcast.select(x, 0.15, method="framefusion_merge")
    assert sel.keep.tolist() == list(range(49))
    assert torch.allclose(sel.tokens, x.mean(0), atol=1e-6)


@pytest.mark.parametrize("T,P,r", [(8, 16, 0.25), (5, 49, 0.15), (12, 30, 0.35), (3, 7, 0.5)])
def test_unrelated_frames_merge_nothing(T, P, r):
    x = _random(T, P)
    assert _num_candidates(x, 0.6) == 0
    sel = vcast.select(x, r, method="framefusion_merge")
    assert sel.keep.tolist() == list(range(T * P))
    assert torch.equal(sel.tokens, x.reshape(-1, 64))


def test_data_dependent_count_is_n_minus_candidates():
    # Half the patches static, half random: fewer candidates than the cap -> N - |cand| remain.
    x = _random(6, 20, seed=2)
    x[:, :10] = _near_static(6, 10, dim=64, seed=3)
    cand = _num_candidates(x, 0.6)
    assert cand == 5 * 10
    sel = vcast.select(x, 0.25, method="framefusion_merge")  # cap = 90 > 50
    assert sel.keep.numel() == 120 - cand
    assert sel.budgets.tolist() == [20] + [10] * 5


def test_planted_cosines_cap_takes_the_most_similar():
    # T=2, P=4, D=2: frame 1's cosines to frame 0 are 0.7, 0.99, 0.8, 0.9 (all candidates).
    cosines = torch.tensor([0.7, 0.99, 0.8, 0.9])
    scales = torch.tensor([1.0, 2.0, 3.0, 4.0])
    frame1 = torch.stack([cosines, torch.sqrt(1 - cosines**2)], dim=1) * scales[:, None]
    frame0 = torch.tensor([[1.0, 0.0]]).expand(4, 2)
    x = torch.stack([frame0, frame1])
    # r = 0.75: cap = floor(0.25 * 8) = 2 -> merge the two most similar, tokens 1 and 3 of frame 1.
    sel = vcast.select(x, 0.75, method="framefusion_merge")
    assert sel.keep.tolist() == [0, 1, 2, 3, 4, 6]
    expected = torch.stack([frame0[0], (frame0[1] + frame1[1]) / 2, frame0[2], (frame0[3] + frame1[3]) / 2,
                            frame1[0], frame1[2]])
    assert torch.allclose(sel.tokens, expected, atol=1e-6)
    # threshold 0.85: two candidates < cap 4 at r = 0.5 -> both merged, N - 2 remain.
    sel = vcast.select(x, 0.5, method="framefusion_merge", threshold=0.85)
    assert sel.keep.tolist() == [0, 1, 2, 3, 4, 6]
    # threshold 0.95: one candidate; r = 1 (cap 0) merges nothing.
    assert vcast.select(x, 0.5, method="framefusion_merge", threshold=0.95).keep.tolist() == [0, 1, 2, 3, 4, 6, 7]
    assert vcast.select(x, 1.0, method="framefusion_merge").keep.tolist() == list(range(8))


def test_ties_go_to_the_lower_flat_index():
    # One vector everywhere: six exactly tied candidates (flat 3..8), cap = floor(0.4 * 9) = 3 at
    # r = 0.6. Frame-major ties merge all of frame 1 (flat 3, 4, 5); the official patch-major
    # order would take flat 3, 6, 4 instead.
    v = torch.randn(6, generator=torch.Generator().manual_seed(7))
    x = v.expand(3, 3, 6).clone()
    sel = vcast.select(x, 0.6, method="framefusion_merge")
    assert sel.keep.tolist() == [0, 1, 2, 6, 7, 8]
    assert torch.allclose(sel.tokens, v.expand(6, 6))


def test_runs_collapse_into_the_token_before_them():
    # One patch over 6 frames: a, 2a, 3a, b, 4b, a with a orthogonal to b. Candidates (cos 1):
    # frames 1, 2, 4. Run (1, 2) -> frame 0 = mean(a, 2a, 3a) = 2a; run (4) -> frame 3 =
    # mean(b, 4b) = 2.5b; frame 5 stays a.
    a = torch.tensor([1.0, 0.0, 2.0, 0.0])
    b = torch.tensor([0.0, 3.0, 0.0, -1.0])
    x = torch.stack([a, 2 * a, 3 * a, b, 4 * b, a])[:, None, :]
    sel = vcast.select(x, 0.25, method="framefusion_merge")  # cap = floor(4.5) = 4 > 3
    assert sel.keep.tolist() == [0, 3, 5]
    assert sel.budgets.tolist() == [1, 0, 0, 1, 0, 1]
    assert torch.allclose(sel.tokens, torch.stack([2 * a, 2.5 * b, a]), atol=1e-6)


def test_static_patch_collapses_into_first_frame_mean():
    # Patch 3 is v * (t + 1) over 5 frames (cosine 1, different values): it becomes one token at
    # frame 0 whose value is v * mean(1..5) = 3 v. The other patches are unrelated noise.
    x = _random(5, 8, dim=64, seed=11)
    v = _random(1, 1, dim=64, seed=12)[0, 0]
    x[:, 3] = v * torch.arange(1, 6, dtype=torch.float32)[:, None]
    assert _num_candidates(x, 0.6) == 4
    sel = vcast.select(x, 0.5, method="framefusion_merge")
    assert sel.keep.numel() == 40 - 4
    assert sel.mask()[:, 3].tolist() == [True, False, False, False, False]
    row = sel.keep.tolist().index(3)
    assert torch.allclose(sel.tokens[row], 3 * v, atol=1e-5)
    others = [k for k in range(sel.keep.numel()) if k != row]
    assert torch.equal(sel.tokens[others], x.reshape(-1, 64)[sel.keep[others]])


def test_duplicate_frame_merged_into_predecessor():
    # Frame 3 = 2 * frame 2 (cosine 1): merged entirely when the cap allows; frame 2's tokens
    # become 1.5 * frame 2.
    x = _random(6, 16, seed=5)
    x[3] = 2 * x[2]
    assert _num_candidates(x, 0.6) == 16
    sel = vcast.select(x, 0.25, method="framefusion_merge")  # cap = 72 >= 16 candidates
    assert sel.budgets.tolist() == [16, 16, 16, 0, 16, 16]
    rows = torch.nonzero(sel.keep // 16 == 2).flatten()
    assert torch.allclose(sel.tokens[rows], 1.5 * x[2], atol=1e-5)
    # r = 0.9: cap = floor(0.1 * 96) = 9 < 16 -> only 9 of the duplicate's tokens merge;
    # ceil(0.9 * 96) = 87 remain.
    capped = vcast.select(x, 0.9, method="framefusion_merge")
    assert capped.keep.numel() == 87
    assert capped.budgets.tolist() == [16, 16, 16, 7, 16, 16]


def test_deterministic():
    x = _near_static(7, 12, seed=9)
    a = vcast.select(x, 0.3, method="framefusion_merge")
    b = vcast.select(x, 0.3, method="framefusion_merge")
    assert torch.equal(a.keep, b.keep) and torch.equal(a.tokens, b.tokens)


def test_single_frame_unchanged():
    x = _random(1, 9)
    sel = vcast.select(x, 0.25, method="framefusion_merge")
    assert sel.keep.tolist() == list(range(9))
    assert torch.equal(sel.tokens, x[0])


@pytest.mark.parametrize("P", [1, 2, 3])
def test_tiny_frames(P):
    # T = 4, r = 0.5: N = 4P, cap = 2P <= 3P candidates -> 2P tokens remain.
    x = _near_static(4, P, seed=P)
    sel = vcast.select(x, 0.5, method="framefusion_merge")
    assert sel.keep.numel() == 2 * P and int(sel.budgets.sum()) == 2 * P
    assert sel.budgets[0] == P
    assert sel.tokens.shape == (2 * P, 32)


def test_bf16_same_as_float32_upcast():
    x = _random(8, 20, seed=13)
    x[:, :8] = _near_static(8, 8, dim=64, seed=14)
    x[4] = x[3]  # duplicate frame
    low = vcast.select(x.to(torch.bfloat16), 0.3, method="framefusion_merge")
    high = vcast.select(x.to(torch.bfloat16).float(), 0.3, method="framefusion_merge")
    assert torch.equal(low.keep, high.keep)
    assert torch.equal(low.tokens, high.tokens)
    assert low.keep.numel() == 160 - (7 * 8 + 12)  # static patches of frames 1-7 + rest of frame 4


@pytest.mark.parametrize("bad", [1.5, -1.01, float("nan"), float("inf"), "0.6", None, True])
def test_bad_threshold(bad):
    with pytest.raises(ValueError, match="threshold must"):
        vcast.select(_random(3, 4), 0.5, method="framefusion_merge", threshold=bad)


def test_registration_and_unknown_parameter():
    assert vcast.registry.method_inputs("framefusion_merge") == ()
    assert vcast.method_params("framefusion_merge") == {"threshold": 0.6, "num_layers": None, "variant": "paper"}
    with pytest.raises(ValueError, match="'k'"):
        vcast.select(_random(3, 4), 0.5, method="framefusion_merge", k=0.7)


# variant="official": thu-nics/FrameFusion@fbec1d2 in the input dtype -------------------------------------
from baselines.framefusion_merge.release import adjacent_similarity, merge_choice, merge_tokens  # noqa: E402
from vcast.registry import method_variants  # noqa: E402


def _three_frames(dtype: torch.dtype) -> torch.Tensor:
    """One patch over 3 frames: [1, 0], [2^-8, 0], [2^-8, 0]; every cosine is exactly 1."""
    return torch.tensor([[[1.0, 0.0]], [[2.0**-8, 0.0]], [[2.0**-8, 0.0]]], dtype=dtype)


def test_official_bf16_merge_adds_in_bf16():
    # u = 1 - 28 * 0.25 / 28 = 0.75 > a = 2/3: both later frames merge into frame 0.
    # The release adds in bf16: 1 + 2^-8 rounds to 1 (half to even), twice; then 1 / 3 in bf16
    # is 0.333984375. In float32 the sum is 129/128 and the mean 43/128 = 0.3359375.
    x = _three_frames(torch.bfloat16)
    sel = vcast.select(x, 0.25, method="framefusion_merge", variant="official")
    assert sel.keep.tolist() == [0]
    assert sel.tokens.dtype == torch.bfloat16
    assert sel.tokens.float().tolist() == [[0.333984375, 0.0]]
    sel32 = vcast.select(x.float(), 0.25, method="framefusion_merge", variant="official")
    assert sel32.tokens.dtype == torch.float32 and sel32.tokens.tolist() == [[43 / 128, 0.0]]
    # paper: float32 whatever the input dtype
    paper = vcast.select(x, 0.25, method="framefusion_merge")
    assert paper.tokens.dtype == torch.float32 and paper.tokens.tolist() == [[43 / 128, 0.0]]


def test_official_threshold_is_compared_in_the_similarity_dtype():
    # torch casts the Python threshold to the tensor's dtype: 0.5978 becomes bf16 0.59765625.
    sims = torch.tensor([-2.0, 0.59765625, 0.5], dtype=torch.bfloat16)
    assert merge_choice(sims, 0.5978, 0.9).merged.tolist() == [False, True, False]
    assert merge_choice(sims.float(), 0.5978, 0.9).merged.tolist() == [False, False, False]


def test_official_merge_choice_branches():
    sims = torch.tensor([-2.0, 0.9, 0.7, -2.0, 0.95, 0.2])
    # a = 3/6 = 0.5 < u = 0.6: every candidate merges, a is the step's share
    choice = merge_choice(sims, 0.6, 0.6)
    assert choice.merged.tolist() == [False, True, True, False, True, False]
    assert not choice.capped and choice.share == 0.5
    # a = 0.5 >= u = 0.5: only int(0.5 * 6) = 3 ... the top 3, here all three candidates
    assert merge_choice(sims, 0.6, 0.5).capped
    # u = 0.4: int(2.4) = 2, the two most similar (0.95, 0.9)
    choice = merge_choice(sims, 0.6, 0.4)
    assert choice.capped and choice.merged.tolist() == [False, True, False, False, True, False]


def test_official_similarity_has_no_epsilon():
    # sum(a*b) / (|a| |b|): a zero vector gives NaN (never >= S_th), a patch's first token -2.
    ordered = torch.tensor([[1.0, 0.0], [0.0, 0.0], [3.0, 4.0], [3.0, 4.0]])
    sims = adjacent_similarity(ordered, torch.tensor([0, 0, 1, 1]))
    assert sims[0] == -2 and math.isnan(sims[1]) and sims[2] == -2 and sims[3] == 1


def test_official_merge_tokens_sequential_runs():
    # patch-major [a0, a1, a2 | b0, b1]: runs (a1, a2) -> a0 and (b1) -> b0
    ordered = torch.tensor([[1.0], [2.0], [6.0], [10.0], [20.0]])
    merged = torch.tensor([False, True, True, False, True])
    assert merge_tokens(ordered, merged).flatten().tolist() == [3.0, 2.0, 6.0, 15.0, 20.0]


def test_official_cap_uses_the_release_float_budget():
    # r = 0.8, N = 5 (static, 4 candidates): u = 1 - 28 * 0.8 / 28 = 0.19999999999999996 and
    # a = 0.8 >= u: capped with int(u * 5) = int(0.9999999999999998) = 0 -> nothing merges.
    # The paper cap floor((1 - 0.8) * 5) = 1 merges one token.
    x = torch.ones(5, 1, 4)
    assert vcast.select(x, 0.8, method="framefusion_merge", variant="official").keep.numel() == 5
    assert vcast.select(x, 0.8, method="framefusion_merge").keep.numel() == 4
    # num_layers is the formula's L: r = 0.9, N = 10: L = 28 gives u = 0.09999999999999998, int(u N) = 0
    # (nothing merges); L = 36 gives u = 0.10000000000000009, int(u N) = 1.
    y = torch.ones(10, 1, 4)
    assert vcast.select(y, 0.9, method="framefusion_merge", variant="official").keep.numel() == 10
    assert vcast.select(y, 0.9, method="framefusion_merge", variant="official", num_layers=36).keep.numel() == 9


def test_official_bf16_vs_float32_choice_differs_paper_does_not():
    # b = (153, 1, 1, 10, 205) / 256 has |b|^2 = (23409 + 1 + 1 + 100 + 42025) / 65536 = 1 exactly
    # (every value and square exact), so its cosine to a = (1, 0, 0, 0, 0) is exactly
    # 153/256 = 0.59765625 in float32 and in bf16. With S_th = 0.5977
    # the bf16 comparison casts S_th to bf16 (0.59765625): a candidate; float32 compares with 0.5977: not.
    a = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0])
    b = torch.tensor([153.0, 1.0, 1.0, 10.0, 205.0]) / 256
    assert float(b.double().norm()) == 1.0
    x = torch.stack([a, b])[:, None, :]  # [T=2, P=1, D=5]
    official32 = vcast.select(x, 0.25, method="framefusion_merge", variant="official", threshold=0.5977)
    official16 = vcast.select(x.bfloat16(), 0.25, method="framefusion_merge", variant="official", threshold=0.5977)
    assert official32.keep.tolist() == [0, 1] and official16.keep.tolist() == [0]
    paper32 = vcast.select(x, 0.25, method="framefusion_merge", threshold=0.5977)
    paper16 = vcast.select(x.bfloat16(), 0.25, method="framefusion_merge", threshold=0.5977)
    assert paper32.keep.tolist() == paper16.keep.tolist() == [0, 1]


def test_official_variant_registration_and_errors():
    assert method_variants("framefusion_merge") == ("paper", "official")
    with pytest.raises(ValueError, match="vidcom2_qwen"):
        vcast.select(_three_frames(torch.float32), 0.5, method="framefusion_merge", variant="vidcom2_qwen")
    with pytest.raises(ValueError, match="num_layers"):
        vcast.select(_three_frames(torch.float32), 0.5, method="framefusion_merge", num_layers=28)
    with pytest.raises(ValueError, match="num_layers"):
        vcast.select(_three_frames(torch.float32), 0.5, method="framefusion_merge", variant="official", num_layers=0)


def test_official_deterministic_and_single_frame():
    x = _near_static(4, 9).bfloat16()
    a = vcast.select(x, 0.3, method="framefusion_merge", variant="official")
    b = vcast.select(x, 0.3, method="framefusion_merge", variant="official")
    assert torch.equal(a.keep, b.keep) and torch.equal(a.tokens, b.tokens)
    one = vcast.select(_random(1, 6), 0.25, method="framefusion_merge", variant="official")
    assert one.keep.tolist() == list(range(6))
