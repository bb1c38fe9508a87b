"""V-CAST ``variant="official"`` (the released code's arithmetic) against our own known answers.

Every expected value here is worked out by hand in the comments (bf16 steps rounded explicitly);
none comes from running the released code.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

import vcast
from vcast.allocation import allocate_official, official_weights, trim_official_excess
from vcast.methods.vcast.official import official_curvature, official_frame_scores
from vcast.registry import method_params, method_variants
from vcast.temporal import cosine, curvature, unit_directions


def test_registered_with_both_variants_and_paper_default():
    assert method_variants("vcast") == ("paper", "official")
    params = method_params("vcast")
    assert params["variant"] == "paper" and params["allocation"] is None
    assert (params["tau"], params["k_min"]) == (0.7, 1)  # the release's constants


@pytest.mark.parametrize("variant", ["vidcom2_qwen", "bogus"])
def test_unknown_variant_is_refused_by_name(variant):
    with pytest.raises(ValueError, match=f"'{variant}'"):
        vcast.select(torch.randn(3, 4, 8), 0.5, variant=variant)


@pytest.mark.parametrize("knob,value", [
    ("temporal", "uniform"), ("spatial", "activation"), ("weights", (1.0, 0.5)), ("allocation", "paper"),
])
def test_official_refuses_knobs_the_release_lacks(knob, value):
    with pytest.raises(ValueError, match=re.escape(f"got {knob}={value!r}")):
        vcast.select(torch.randn(3, 4, 8), 0.5, variant="official", **{knob: value})


def test_official_accepts_its_own_choices_spelled_out():
    frames = torch.randn(5, 6, 8, generator=torch.Generator().manual_seed(0))
    default = vcast.select(frames, 0.3, variant="official")
    spelled = vcast.select(frames, 0.3, variant="official", allocation="official", temporal="curvature",
                           spatial="dual_anchor", weights=(1, 1), tau=0.7, k_min=1)
    assert torch.equal(default.keep, spelled.keep) and torch.equal(default.budgets, spelled.budgets)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_single_temporal_patch_is_kept_whole(dtype):
    frames = torch.randn(1, 8, 4, generator=torch.Generator().manual_seed(1)).to(dtype)
    official = vcast.select(frames, 0.25, variant="official")
    assert official.keep.tolist() == list(range(8)) and official.budgets.tolist() == [8]
    # paper (and paper with the released allocator) prunes it: B = 2.
    assert vcast.select(frames, 0.25).budgets.tolist() == [2]
    assert vcast.select(frames, 0.25, allocation="official").budgets.tolist() == [2]


def test_two_patches_round_half_to_even_and_equal_weights():
    # T = 2: kappa = [1, 1] (both ends are the constant 1), p = [0.5, 0.5].
    # T P r = 2 * 7 * 0.25 = 3.5 -> round() = 4 (half to even), R = 2, raw = [1, 1] -> [2, 2].
    # paper: floor(3.5) = 3, R = 1, equal remainders -> the lower frame: [2, 1].
    frames = torch.randn(2, 7, 4, generator=torch.Generator().manual_seed(2))
    official = vcast.select(frames, 0.25, variant="official")
    assert official.budgets.tolist() == [2, 2]
    assert official.frame_weights.tolist() == [0.5, 0.5]
    assert vcast.select(frames, 0.25).budgets.tolist() == [2, 1]
    # 2 * 5 * 0.25 = 2.5 -> round() = 2 (half to even, not up): [1, 1].
    assert vcast.select(frames[:, :5], 0.25, variant="official").budgets.tolist() == [1, 1]


def test_equal_norms_give_a_zero_norm_term_not_nan():
    # All norms 1: the min-max is 0 / (0 + 1e-6) = 0. Mean (0, 1/3) -> unit (0, 1): cos = 0, 1, 0.
    frame = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    scores = official_frame_scores(frame, torch.tensor([0.0, 1.0]))
    assert scores.tolist() == [1.0, 0.0, 1.0]


# One frame [P = 3, D = 2] whose mean is (13, 0), so the unit mean is exactly (1, 0) in any dtype
# and the cosine of a token (a, b) is a / |(a, b)|.
HAND_FRAME = [[3.0, -4.0], [27.0, -13.0], [9.0, 17.0]]


def test_bf16_arithmetic_changes_the_kept_token_hand_computed():
    """Score = (1 - cos) + (|x| - min) / (max - min + 1e-6); norms 5, sqrt(898) = 29.9666,
    sqrt(370) = 19.2354, so the norm term is 0, ~1 and 14.2354 / 24.9666 = 0.570178.

    float32: cosines 0.6, 0.901002, 0.467888 -> scores 0.4, 1.098998, 1.102291: token 2.
    bf16 (cosine_similarity divides by the bf16 norm, rounds each step to 8 bits):
      token 1: |x| = 29.9666 -> 30.0; 27 / 30 = 0.9 -> 0.8984375; 1 - 0.8984375 = 0.1015625;
      token 2: |x| = 19.2354 -> 19.25; 9 / 19.25 = 0.467532 -> 0.466796875;
               1 - 0.466796875 = 0.533203125, half-way between 0.53125 and 0.53515625 -> 0.53125;
      token 0: 3 / 5 = 0.6 -> 0.6015625; 1 - 0.6015625 = 0.3984375.
      scores 0.3984375, 1.1015625 - 6e-8, 0.53125 + 0.570178 = 1.101428: token 1.
    """
    frame = torch.tensor(HAND_FRAME)
    unit_mean = torch.tensor([1.0, 0.0])
    norms = torch.tensor([5.0, math.sqrt(898), math.sqrt(370)])
    norm_term = (norms - 5.0) / (norms[1] - 5.0 + 1e-6)
    bf16_scores = official_frame_scores(frame.bfloat16(), unit_mean.bfloat16())
    assert bf16_scores.dtype == torch.float32
    # (the float32 sum rounds, hence the 1e-6; the float32 cosine terms are 1.6e-3 away or more)
    assert torch.allclose(bf16_scores - norm_term, torch.tensor([0.3984375, 0.1015625, 0.53125]), rtol=0, atol=1e-6)
    fp32_scores = official_frame_scores(frame, unit_mean)
    assert fp32_scores.argmax().item() == 2 and bf16_scores.argmax().item() == 1

    # Through vcast.select: two identical patches, r = 0.4 -> B = 2, one token per patch.
    video = frame.expand(2, 3, 2).contiguous()
    assert vcast.select(video, 0.4, variant="official").keep.tolist() == [2, 5]
    assert vcast.select(video.bfloat16(), 0.4, variant="official").keep.tolist() == [1, 4]
    # paper scores in float32 whatever the input dtype: the float32 answer for both.
    assert vcast.select(video, 0.4).keep.tolist() == [2, 5]
    assert vcast.select(video.bfloat16(), 0.4).keep.tolist() == [2, 5]


def test_curvature_cosine_clamps_norms_instead_of_adding_eps():
    # Steps of 2**-10 along one axis (exact in float32): the release's cosine is 1, kappa = 0;
    # the paper's a.b / (|a||b| + 1e-6) = 2**-20 / (2**-20 + 1e-6) = 0.48815.
    step = 2.0**-10
    points = torch.tensor([[0.0, 0.0], [step, 0.0], [2 * step, 0.0]])
    assert official_curvature(points).tolist() == [1.0, 0.0, 1.0]
    assert curvature(points)[1].item() == pytest.approx(1 - 2.0**-20 / (2.0**-20 + 1e-6), rel=1e-5)
    # Steps of 2**-21 < eps: both norms are clamped to 1e-6, cos = (2**-21 / 1e-6)**2 = 0.22737.
    tiny = 2.0**-21
    points = torch.tensor([[0.0, 0.0], [tiny, 0.0], [2 * tiny, 0.0]])
    assert official_curvature(points)[1].item() == pytest.approx(1 - (tiny / 1e-6) ** 2, rel=1e-5)
    # A right angle stays a right angle in both forms (norms far above eps).
    corner = torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    assert official_curvature(corner).tolist() == [1.0, 1.0, 1.0]
    assert cosine(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])).item() == 0.0


def test_curvature_runs_in_the_input_dtype():
    directions = torch.nn.functional.normalize(torch.randn(5, 8, generator=torch.Generator().manual_seed(3)), dim=-1)
    assert official_curvature(directions.bfloat16()).dtype == torch.bfloat16
    assert official_curvature(directions).dtype == torch.float32


def nearly_static_video() -> torch.Tensor:
    """[3, 10, 2]: ten tokens with mean (4, 0), drifting by 2**-10 per patch along the second axis.

    Unit means (1, 0), (1, 2**-12), (1, 2**-11) up to float32 rounding: a straight path whose
    steps have |v|**2 = 2**-24 = 6e-8, far below eps = 1e-6.
    """
    base = torch.tensor([[4.0, 1.0], [4.0, -1.0], [2.0, 3.0], [6.0, -3.0], [3.0, 0.0],
                         [5.0, 0.0], [4.0, 2.0], [4.0, -2.0], [1.0, 0.0], [7.0, 0.0]])
    return torch.stack([base + torch.tensor([0.0, t * 2.0**-10]) for t in range(3)])


def test_nearly_static_video_where_the_cosine_eps_decides():
    """official: kappa_1 = 0 (up to 1.2e-7, one float32 ulp in the unit means), p = softmax([1, 0, 1] / 0.7)
    = [4.1722, 1, 4.1722] / 9.3444 = [0.4465, 0.1070, 0.4465]; B = round(15) = 15, R = 12,
    raw = [5.358, 1.284, 5.358] -> [6, 2, 6] and the leftover 1 to frame 0 (equal fractions: the first).
    paper: kappa_1 = 1 - 2**-24 / (2**-24 + 1e-6) = 0.94375, p ~ [0.342, 0.316, 0.342] -> [5, 5, 5],
    with its own allocator and with the released one alike (the cosine, not the allocator, decides).
    """
    video = nearly_static_video()
    official = vcast.select(video, 0.5, variant="official")
    assert official.frame_weights[1].item() == pytest.approx(1 / (2 * math.exp(1 / 0.7) + 1), rel=1e-6)
    assert official.budgets.tolist() == [7, 2, 6]
    assert curvature(unit_directions(video.mean(1)))[1].item() == pytest.approx(1 - 2.0**-24 / (2.0**-24 + 1e-6), rel=1e-4)
    assert vcast.select(video, 0.5).budgets.tolist() == [5, 5, 5]
    assert vcast.select(video, 0.5, allocation="official").budgets.tolist() == [5, 5, 5]
    # tau is the release's constant made a parameter: at tau = 100, p ~ [0.3341, 0.3318, 0.3341],
    # raw = [4.009, 3.982, 4.009] -> [5, 4, 5] and the leftover to frame 1 (fraction 0.98).
    assert vcast.select(video, 0.5, variant="official", tau=100.0).budgets.tolist() == [5, 5, 5]


def test_k_min_is_the_release_min_k():
    # k_min = 0 on the nearly static video: B = 15, raw = p * 15 = [6.697, 1.605, 6.697]
    # -> [6, 1, 6] and the leftover 2 both to frame 0 (the pile-up): [8, 1, 6].
    assert vcast.select(nearly_static_video(), 0.5, variant="official", k_min=0).budgets.tolist() == [8, 1, 6]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_official_selection_is_well_formed_and_deterministic(dtype):
    generator = torch.Generator().manual_seed(4)
    frames = (torch.randn(9, 1, 16, generator=generator).cumsum(0) + torch.randn(9, 20, 16, generator=generator)).to(dtype)
    first = vcast.select(frames, 0.3, variant="official")
    again = vcast.select(frames, 0.3, variant="official")
    assert torch.equal(first.keep, again.keep) and torch.equal(first.budgets, again.budgets)
    assert first.keep.numel() == round(9 * 20 * 0.3) == int(first.budgets.sum())
    assert torch.all(first.keep[1:] > first.keep[:-1])
    assert torch.equal(torch.bincount(first.keep // 20, minlength=9), first.budgets)
    assert first.frame_weights.dtype == torch.float32 and first.budgets.min() >= 1
    # non-contiguous input gives the answer of its contiguous copy
    strided = frames.transpose(0, 1).contiguous().transpose(0, 1)
    assert torch.equal(vcast.select(strided, 0.3, variant="official").keep, first.keep)


def test_allocator_weights_are_renormalised_and_zero_weights_count_as_equal():
    assert official_weights(torch.tensor([1.0, 3.0])).tolist() == [0.25, 0.75]
    assert official_weights(torch.zeros(4)).tolist() == [0.25] * 4
    # R = 6 - 4 = 2 over equal weights: raw 0.5 each -> the leftover 2 pile onto frame 0 (P = 3).
    assert allocate_official(torch.zeros(4), 6, 3, 1).tolist() == [3, 1, 1, 1]


def test_over_budget_branch_takes_back_from_the_lightest_frames():
    # weights order ascending: frame 1 (0.2), frame 2 (0.3), frame 0 (0.5); two tokens too many.
    over = torch.tensor([3, 2, 4])
    assert trim_official_excess(over, torch.tensor([0.5, 0.2, 0.3]), 7, 1).tolist() == [3, 1, 3]
    # frames at k_min give nothing back: frame 1 is skipped.
    assert trim_official_excess(torch.tensor([3, 1, 4]), torch.tensor([0.5, 0.2, 0.3]), 7, 1).tolist() == [3, 1, 3]
    within = torch.tensor([3, 2, 2])
    assert trim_official_excess(within, torch.tensor([0.5, 0.2, 0.3]), 7, 1) is within
