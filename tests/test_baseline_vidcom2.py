"""VidCom2 baseline (baselines/vidcom2/) through ``vcast.select``."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest
import torch
import yaml

import vcast
from vcast.registry import method_inputs, method_variants
from vcast.synthetic_features import synthetic_video_features
from vcast.temporal import multiscale_gaussian_similarity, uniqueness_weights

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "method"
SCALES = (0.125, 0.25, 0.5, 1.0, 2.0)


def random_frames(t: int, p: int, d: int = 24, seed: int = 0) -> torch.Tensor:
    return torch.randn(t, p, d, generator=torch.Generator().manual_seed(seed))


def reference_similarities(frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An independent, loop-by-frame float64 write-up of section 4.1 steps 1-3: v, f [T, P]."""
    t, p, d = frames.shape
    flat = frames.reshape(t * p, d).double()
    variance = ((flat - flat.mean(0)) ** 2).mean(0)
    channels = sorted(range(d), key=lambda c: (float(variance[c]), c))[: max(1, d // 2)]
    x = flat[:, channels]
    x = x / x.norm(dim=1, keepdim=True)
    video_centre = x.mean(0)
    x = x.view(t, p, -1)

    def gaussian(tokens: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
        sq = ((tokens - centre) ** 2).sum(-1)
        return sum(torch.exp(-sq / (2 * a)) for a in SCALES)

    v = torch.stack([gaussian(x[i], video_centre) for i in range(t)])
    f = torch.stack([gaussian(x[i], x[i].mean(0)) for i in range(t)])
    return v, f


def reference_scores(frames: torch.Tensor) -> torch.Tensor:
    v, f = reference_similarities(frames)
    return v + f


def two_valued_video(num_frames: int, tokens_per_frame: int, unique: int) -> torch.Tensor:
    """D = 2 tokens whose low-variance channel 0 is +1 everywhere except frame ``unique`` (-1);
    channel 1 has far larger variance, so VidCom2 keeps channel 0 alone and the normalised
    tokens are +-1. Hand computation: c_v = 1 - 2/T; a +1 token has S(4/T^2), a -1 token
    S((2 - 2/T)^2); for T = 4 the uniqueness gap is S(0.25) - S(2.25) = 2.56, so
    q = softmax(gap / 0.01) is exactly one-hot in float32."""
    generator = torch.Generator().manual_seed(3)
    frames = torch.zeros(num_frames, tokens_per_frame, 2)
    frames[..., 0] = 1.0
    frames[unique, :, 0] = -1.0
    frames[..., 1] = 50.0 * torch.randn(num_frames, tokens_per_frame, generator=generator)
    return frames


@pytest.mark.parametrize("t,p,r", [(8, 16, 0.25), (5, 49, 0.15), (12, 30, 0.35), (3, 7, 0.5), (6, 10, 1.0)])
@pytest.mark.parametrize("temporal", ["uniqueness", "curvature"])
def test_exact_count_and_well_formed(t, p, r, temporal):
    sel = vcast.select(random_frames(t, p), r, method="vidcom2", temporal=temporal)
    expected = math.floor(round(r * t * p, 9))
    assert sel.keep.numel() == expected and int(sel.budgets.sum()) == expected
    assert bool((sel.keep[1:] > sel.keep[:-1]).all())
    assert torch.equal(torch.bincount(sel.keep // p, minlength=t), sel.budgets)
    assert bool((sel.budgets >= 1).all()) and sel.tokens is None
    assert sel.frame_weights.shape == (t,)
    assert float(sel.frame_weights.sum()) == pytest.approx(1.0, abs=1e-5)


def test_keeps_the_lowest_v_plus_f_of_each_frame():
    # Steps 1-5 against an independent float64 write-up (random features: no near-ties).
    frames = random_frames(6, 20, d=16, seed=7)
    sel = vcast.select(frames, 0.3, method="vidcom2")
    scores = reference_scores(frames)
    for t in range(6):
        b = int(sel.budgets[t])
        want = torch.sort(torch.topk(scores[t], b, largest=False).indices).values + t * 20
        got = sel.keep[(sel.keep // 20) == t]
        assert torch.equal(got, want), t


def test_uniqueness_density_matches_reference():
    frames = random_frames(7, 20, d=16, seed=8)
    v, _ = reference_similarities(frames)
    u = -v.mean(1)
    q = torch.softmax((u - u.max()) / 0.01, dim=0)
    want = (1 + q - 1 / 7) / 7
    sel = vcast.select(frames, 0.3, method="vidcom2")
    assert torch.allclose(sel.frame_weights.double(), want, atol=1e-5)
    assert float(q.max()) < 0.99  # not one-hot, so the density really tests u


def test_multiscale_gaussian_by_hand():
    # |x - c|^2 = 1: sum over a in {1/8, ..., 2} of exp(-1 / 2a) = e^-4 + e^-2 + e^-1 + e^-1/2 + e^-1/4.
    value = multiscale_gaussian_similarity(torch.tensor([[1.0, 0.0]]), torch.tensor([0.0, 0.0]))
    want = sum(math.exp(-x) for x in (4, 2, 1, 0.5, 0.25))
    assert float(value[0]) == pytest.approx(want, rel=1e-6)


def test_every_frame_keeps_a_token_when_the_budget_allows():
    # B = T = 10 with q one-hot on frame 3: shares 0.9 and 1.9. Without k_min = 1 the tied
    # remainders would give frame 3 two tokens and frame 9 none.
    sel = vcast.select(two_valued_video(10, 8, unique=3), 1 / 8, method="vidcom2")
    assert sel.budgets.tolist() == [1] * 10


def test_deterministic():
    frames = random_frames(9, 12, seed=2)
    a = vcast.select(frames, 0.3, method="vidcom2")
    b = vcast.select(frames.clone(), 0.3, method="vidcom2")
    assert torch.equal(a.keep, b.keep) and torch.equal(a.budgets, b.budgets)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("t", [1, 4])
@pytest.mark.parametrize("r", [0.3, 0.5, 1.0])
def test_single_frame_and_tiny_frames(t, p, r):
    sel = vcast.select(random_frames(t, p, d=5), r, method="vidcom2")
    expected = math.floor(round(r * t * p, 9))
    assert sel.keep.numel() == expected and int(sel.budgets.sum()) == expected
    assert bool((sel.budgets <= p).all())


def test_single_frame_uses_the_whole_budget():
    sel = vcast.select(random_frames(1, 40), 0.25, method="vidcom2")
    assert sel.budgets.tolist() == [10]


def test_bf16_matches_float32_upcast():
    frames = random_frames(8, 16, seed=4).bfloat16()
    for temporal in ("uniqueness", "curvature"):
        low = vcast.select(frames, 0.25, method="vidcom2", temporal=temporal)
        high = vcast.select(frames.float(), 0.25, method="vidcom2", temporal=temporal)
        assert low.keep.numel() == 32
        assert torch.equal(low.keep, high.keep) and torch.equal(low.budgets, high.budgets)


def test_planted_distinct_frame_gets_the_largest_budget():
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(1, 16, 32, generator=generator)
    frames = base + 0.05 * torch.randn(10, 16, 32, generator=generator)
    frames[6] = torch.randn(16, 32, generator=generator)  # unlike every other frame
    sel = vcast.select(frames, 0.25, method="vidcom2")
    others = torch.cat([sel.budgets[:6], sel.budgets[7:]])
    # q_6 > 0.9 (tests/test_temporal.py), so p_6 >= 1.8/10 and the others <= 1/10 of B = 40:
    # 1 + floor(30 p_6) >= 6 tokens against about 4.
    assert int(sel.budgets[6]) >= 6 and int(sel.budgets[6]) > int(others.max())
    assert int(sel.budgets.sum()) == 40


def test_planted_outlier_token_is_kept_first():
    generator = torch.Generator().manual_seed(1)
    t, p, d = 6, 16, 32
    base = torch.randn(1, 1, d, generator=generator)
    frames = base + 0.1 * torch.randn(t, p, d, generator=generator)
    outliers = [(3 * i + 1) % p for i in range(t)]
    for i, j in enumerate(outliers):
        frames[i, j] = base[0, 0] + 3.0 * torch.randn(d, generator=generator)  # far from both centres
    sel = vcast.select(frames, 1 / p, method="vidcom2")  # B = T: one token per frame
    assert sel.budgets.tolist() == [1] * t
    assert sel.keep.tolist() == [i * p + j for i, j in enumerate(outliers)]


def test_official_allocation_matches_the_hand_rule():
    # q is one-hot on frame 2 (two_valued_video). Official rule:
    # others: round_half_even(0.5 * (1 - 1/4) * 12) = round(4.5) = 4;
    # frame 2: round_half_even(min(1, 0.5 * (2 - 1/4)) * 12) = round(10.5) = 10. Total 22, not 24.
    frames = two_valued_video(4, 12, unique=2)
    q = uniqueness_weights(frames) * 4 - 1 + 1 / 4
    assert float(q[2]) == 1.0 and float(q.sum()) == 1.0
    sel = vcast.select(frames, 0.5, method="vidcom2", allocation="official")
    assert sel.budgets.tolist() == [4, 4, 10, 4]
    assert sel.keep.numel() == 22
    # Every +1 token of a frame ties, so the lowest indices are kept.
    assert sel.keep[:4].tolist() == [0, 1, 2, 3]
    # The paper rule on the same video: B = 24, k_min 1, shares 20 p = (3.75, 3.75, 8.75, 3.75),
    # three leftover tokens to the (tied) remainders of frames 0, 1, 2.
    paper = vcast.select(frames, 0.5, method="vidcom2")
    assert paper.budgets.tolist() == [5, 5, 10, 4]


def test_official_allocation_keeps_one_token_per_frame_below_the_budget():
    # others: round(0.25 * 0.75 * 2) = round(0.375) = 0 -> clamped to 1; unique: round(0.875) = 1.
    frames = two_valued_video(4, 2, unique=1)
    sel = vcast.select(frames, 0.25, method="vidcom2", allocation="official")
    assert sel.budgets.tolist() == [1, 1, 1, 1] and sel.keep.numel() == 4
    paper = vcast.select(frames, 0.25, method="vidcom2")
    assert paper.keep.numel() == 2  # floor(0.25 * 8), k_min 0 since B < T


def test_official_allocation_rounds_halves_to_even():
    # T = 8, P = 16, r = 0.25, q one-hot on frame 5: seven frames get round(0.21875 * 16) =
    # round(3.5) = 4 and frame 5 round(0.46875 * 16) = round(7.5) = 8: 36 tokens, not 32.
    sel = vcast.select(two_valued_video(8, 16, unique=5), 0.25, method="vidcom2", allocation="official")
    assert sel.budgets.tolist() == [4] * 5 + [8] + [4] * 2
    assert sel.keep.numel() == 36


def test_official_allocation_on_random_video():
    # The per-frame rule with Python's round (half to even) on the float64 value of q.
    frames = random_frames(8, 16, seed=4)
    q = (uniqueness_weights(frames) * 8 - 1 + 1 / 8).double()
    want = [max(1, round(min(1.0, 0.4 * (1 + float(x) - 1 / 8)) * 16)) for x in q]
    sel = vcast.select(frames, 0.4, method="vidcom2", allocation="official")
    assert sel.budgets.tolist() == want
    assert sel.keep.numel() == sum(want)


@pytest.mark.parametrize("t,p,r", [(24, 16, 0.25), (24, 9, 0.1), (3, 7, 0.1), (10, 30, 0.35)])
def test_curvature_budgets_are_vcasts(t, p, r):
    frames = synthetic_video_features(num_frames=t, tokens_per_frame=p, dim=32, seed=5).features
    sel = vcast.select(frames, r, method="vidcom2", temporal="curvature")
    ref = vcast.select(frames, r, method="vcast")
    assert torch.equal(sel.budgets, ref.budgets)
    assert torch.allclose(sel.frame_weights, ref.frame_weights)
    # Only the budgets are V-CAST's: the token choice is VidCom2's.
    uniqueness = vcast.select(frames, r, method="vidcom2")
    scores = reference_scores(frames)
    for i in range(t):
        got = sel.keep[(sel.keep // p) == i] - i * p
        want = torch.sort(torch.topk(scores[i], int(sel.budgets[i]), largest=False).indices).values
        assert torch.equal(got, want)
    if t == 24 and p == 16:
        assert not torch.equal(sel.budgets, uniqueness.budgets)


def test_curvature_tau_changes_budgets():
    frames = synthetic_video_features(num_frames=24, tokens_per_frame=16, dim=32, seed=5).features
    a = vcast.select(frames, 0.25, method="vidcom2", temporal="curvature", tau=0.7)
    b = vcast.select(frames, 0.25, method="vidcom2", temporal="curvature", tau=0.2)
    assert torch.equal(b.budgets, vcast.select(frames, 0.25, method="vcast", tau=0.2).budgets)
    assert not torch.equal(a.budgets, b.budgets)


@pytest.mark.parametrize(
    "params,name",
    [
        ({"temporal": "uniform"}, "temporal"),
        ({"allocation": "exact"}, "allocation"),
        ({"tau": 0.0}, "tau"),
        ({"tau": -1.0}, "tau"),
        ({"tau": float("nan")}, "tau"),
        ({"temporal": "curvature", "allocation": "official"}, "allocation"),
        ({"seed": 1}, "seed"),
    ],
)
def test_bad_parameters_are_named(params, name):
    with pytest.raises(ValueError, match=name):
        vcast.select(random_frames(4, 8), 0.5, method="vidcom2", **params)


def test_needs_no_model_inputs():
    assert method_inputs("vidcom2") == ()
    with pytest.raises(ValueError, match="vision_attention"):
        vcast.select(random_frames(4, 8), 0.5, method="vidcom2", vision_attention=torch.ones(4, 8))


@pytest.mark.parametrize("config", ["vidcom2", "vidcom2_vcast"])
def test_method_configs_run(config):
    spec = yaml.safe_load((CONFIGS / f"{config}.yaml").read_text())
    assert spec["name"] == config and spec["id"] == "vidcom2"
    frames = synthetic_video_features(num_frames=12, tokens_per_frame=16, dim=32, seed=2).features
    sel = vcast.select(frames, 0.25, method=spec["id"], **(spec["params"] or {}))
    assert sel.keep.numel() == 48
    if config == "vidcom2_vcast":
        assert torch.equal(sel.budgets, vcast.select(frames, 0.25, method="vcast").budgets)


# --- variant="official": the released code, arithmetic in the input dtype -------------------

def f32(x: float) -> float:
    """Round a Python float to the nearest float32 (half to even)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16(x: float) -> float:
    """Round to float32, then to bfloat16 by hand: keep the top 16 bits, half to even."""
    bits = struct.unpack("<I", struct.pack("<f", f32(x)))[0]
    low = bits & 0xFFFF
    high = bits >> 16
    if low > 0x8000 or (low == 0x8000 and high & 1):
        high += 1
    return struct.unpack("<f", struct.pack("<I", high << 16))[0]


def test_bf16_helper_by_hand():
    assert bf16(0.3) == 0.30078125  # 1.0011010b * 2^-2 (0.3 * 512 = 153.6 -> 154)
    assert bf16(10.46875) == 10.5  # halfway between 10.4375 and 10.5: to the even mantissa
    assert bf16(259.0) == 260.0  # halfway between 258 and 260: to the even mantissa


def test_variants_are_declared():
    assert method_variants("vidcom2") == ("paper", "official")


def test_official_float32_counts_do_not_sum_to_the_budget():
    # q one-hot on frame 2, mean q = 1/4: scale = 0.5 * (0.75, 0.75, 1.75, 0.75) clamped to 1,
    # k = round_half_even(scale * 12) = (round(4.5), ., round(10.5), .) = (4, 4, 10, 4): 22, not 24.
    frames = two_valued_video(4, 12, unique=2)
    sel = vcast.select(frames, 0.5, method="vidcom2", variant="official")
    assert sel.budgets.tolist() == [4, 4, 10, 4] and sel.keep.numel() == 22
    assert torch.equal(sel.keep, torch.unique(sel.keep))  # ascending, no repeats
    same = vcast.select(frames, 0.5, method="vidcom2", allocation="official")  # today's knob
    assert torch.equal(same.budgets, sel.budgets)


def test_official_keeps_one_token_per_frame_below_the_budget():
    # round(0.25 * 0.75 * 2) = round(0.375) = 0 -> clamped to 1; frame 1: round(0.875) = 1.
    sel = vcast.select(two_valued_video(4, 2, unique=1), 0.25, method="vidcom2", variant="official")
    assert sel.budgets.tolist() == [1, 1, 1, 1] and sel.keep.numel() == 4


def test_official_bf16_counts_by_hand():
    # two_valued_video: q one-hot on frame 2, so 1 + q - mean q = (0.75, 0.75, 1.75, 0.75), exact in
    # both dtypes. float32: f32(0.3) * 0.75 = 0.225000009 (exact), * 20 -> f32 4.5 -> round 4;
    # f32(0.3) * 1.75 -> 0.52500004, * 20 -> f32 10.500001 -> 11.
    # bf16: 0.225000009 -> 0.224609375, * 20 = 4.4921875 -> bf16 4.5 -> 4;
    # 0.52500004 -> 0.5234375, * 20 = 10.46875 -> bf16 10.5 (tie to even) -> 10.
    r, p = 0.3, 20
    want32 = [round(f32(f32(f32(r) * s) * p)) for s in (0.75, 0.75, 1.75, 0.75)]
    want16 = [round(bf16(bf16(f32(r) * s) * p)) for s in (0.75, 0.75, 1.75, 0.75)]
    assert want32 == [4, 4, 11, 4] and want16 == [4, 4, 10, 4]
    frames = two_valued_video(4, p, unique=2)
    high = vcast.select(frames, r, method="vidcom2", variant="official")
    low = vcast.select(frames.bfloat16(), r, method="vidcom2", variant="official")
    assert high.budgets.tolist() == want32 and high.keep.numel() == 23
    assert low.budgets.tolist() == want16 and low.keep.numel() == 22
    # variant="paper" does not follow the dtype: floor(0.3 * 80) = 24 in both.
    for dtype in (torch.float32, torch.bfloat16):
        paper = vcast.select(frames.to(dtype), r, method="vidcom2")
        assert paper.budgets.tolist() == [5, 5, 10, 4]


def test_official_single_frame_is_pruned_with_bf16_rounding():
    # T = 1: no skip; q = [1], scale = r. float32: f32(0.3) * 58 = 17.4 -> 17 tokens.
    # bf16: bf16(0.3) = 0.30078125, * 58 = 17.4453125 -> bf16 17.5 -> round half even 18.
    frames = random_frames(1, 58, d=16, seed=6)
    assert round(f32(f32(0.3) * 58)) == 17 and round(bf16(bf16(0.3) * 58)) == 18
    high = vcast.select(frames, 0.3, method="vidcom2", variant="official")
    low = vcast.select(frames.bfloat16(), 0.3, method="vidcom2", variant="official")
    assert high.budgets.tolist() == [17] and low.budgets.tolist() == [18]
    assert vcast.select(frames.bfloat16(), 0.3, method="vidcom2").budgets.tolist() == [17]
    # float32: the 17 smallest v + f (random features: no near-ties), ascending.
    want = torch.sort(torch.topk(reference_scores(frames)[0], 17, largest=False).indices).values
    assert torch.equal(high.keep, want)


def test_official_float32_follows_the_released_rule_on_random_video():
    # Counts from the float64 reference with the release's ``mean q`` (not 1/T) and Python round;
    # tokens: the k_t smallest v + f per frame, index t * P + i.
    t, p, r = 8, 16, 0.4
    frames = random_frames(t, p, seed=4)
    v, _ = reference_similarities(frames)
    u = -v.mean(1)
    q = torch.softmax((u - u.max()) / 0.01, dim=0)
    want = [max(1, round(min(1.0, r * (1 + float(x) - float(q.mean()))) * p)) for x in q]
    sel = vcast.select(frames, r, method="vidcom2", variant="official")
    assert sel.budgets.tolist() == want
    scores = reference_scores(frames)
    expected = torch.cat([torch.sort(torch.topk(scores[i], want[i], largest=False).indices).values + i * p
                          for i in range(t)])
    assert torch.equal(sel.keep, expected)
    assert float(sel.frame_weights.sum()) == pytest.approx(1.0, abs=1e-5)


def test_official_follows_the_input_dtype_and_paper_does_not():
    frames = random_frames(8, 16, seed=4)
    high = vcast.select(frames.bfloat16().float(), 0.25, method="vidcom2", variant="official")
    low = vcast.select(frames.bfloat16(), 0.25, method="vidcom2", variant="official")
    assert not torch.equal(high.keep, low.keep)  # bf16 scores reorder near-tied tokens
    a = vcast.select(frames.bfloat16().float(), 0.25, method="vidcom2")
    b = vcast.select(frames.bfloat16(), 0.25, method="vidcom2")
    assert torch.equal(a.keep, b.keep)


def test_official_is_deterministic():
    frames = random_frames(6, 30, seed=9).bfloat16()
    a = vcast.select(frames, 0.25, method="vidcom2", variant="official")
    b = vcast.select(frames.clone(), 0.25, method="vidcom2", variant="official")
    assert torch.equal(a.keep, b.keep) and torch.equal(a.budgets, b.budgets)


def test_official_refuses_where_the_release_fails():
    # bf16 cannot hold P = 259: at r = 1, T = 1, scale * P = 1.0 * 259 -> bf16 260 > P.
    with pytest.raises(ValueError, match="exceeds P"):
        vcast.select(random_frames(1, 259, d=4).bfloat16(), 1.0, method="vidcom2", variant="official")
    assert vcast.select(random_frames(1, 259, d=4), 1.0, method="vidcom2", variant="official").keep.numel() == 259
    with pytest.raises(ValueError, match="channel"):  # int(0.5 * 1) = 0 channels
        vcast.select(random_frames(2, 4, d=1), 0.5, method="vidcom2", variant="official")


@pytest.mark.parametrize(
    "params,name",
    [
        ({"variant": "vidcom2_qwen"}, "variant"),
        ({"variant": "clean"}, "variant"),
        ({"variant": "official", "temporal": "curvature"}, "temporal"),
        ({"variant": "official", "allocation": "paper"}, "allocation"),
        ({"variant": "official", "allocation": "exact"}, "allocation"),
    ],
)
def test_official_bad_parameters_are_named(params, name):
    with pytest.raises(ValueError, match=name):
        vcast.select(random_frames(4, 8), 0.5, method="vidcom2", **params)
