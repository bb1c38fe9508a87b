"""DyCoke TTM baseline (baselines/dycoke/): DyCoke's own kept count, pairs/quads, edge cases;
the official and vidcom2_qwen variants (known answers, hand-rounded bf16 cases, odd T, counts)."""

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


def test_share_at_32_frames_matches_the_release_layout():
    # KD-TAO/DyCoke@dd74634 dycole_ttm's layout (L35-91): F=32 -> 78.4% (K=0.3), 64.1% (K=0.5),
    # 49.4% (K=0.7), 28.1% (K=1.0);
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
    assert vcast.method_params("dycoke") == {"k": None, "variant": "paper"}
    with pytest.raises(ValueError, match="threshold"):
        vcast.select(_video(4, 8), 0.5, method="dycoke", threshold=0.5)


# ---- variants: official (KD-TAO/DyCoke dycole_ttm) and vidcom2_qwen (VidCom2 qwen port) ----------

def _bf(value: float) -> float:
    """``value`` rounded to the nearest bfloat16 (ties to even), back as a Python float."""
    return torch.tensor(value, dtype=torch.float64).to(torch.bfloat16).item()


def _bf16_normalize(v: list[float]) -> list[float]:
    """``F.normalize`` in bf16, step by step: the norm rounded, then each quotient rounded."""
    norm = _bf(math.sqrt(sum(c * c for c in v)))
    return [_bf(c / norm) for c in v]


def _bf16_cosine(a: list[float], b: list[float]) -> float:
    """``F.cosine_similarity`` in bf16: both vectors normalised (as above), each product rounded,
    the sum accumulated wide and rounded once."""
    a, b = _bf16_normalize(a), _bf16_normalize(b)
    return _bf(sum(_bf(x * y) for x, y in zip(a, b)))


def test_variants_declared_and_unknown_refused():
    assert vcast.registry.method_variants("dycoke") == ("paper", "official", "vidcom2_qwen")
    with pytest.raises(ValueError, match="'dycoke'.*'vidcom2_qwen'.*'clean'"):
        vcast.select(_video(4, 8), 0.5, method="dycoke", variant="clean")


def test_official_count_default_k_ignores_ratio():
    # K = 0.7 by default (lmms-eval): n = int((1 - 0.7) * 196) = int(58.800000000000004) = 58;
    # whole frames 0, 4, ..., 28 and 30: 9 * 196 + 23 * 58 = 3098 (49.4%).
    x = _video(32, 196, dim=8)
    a = vcast.select(x, 0.1, method="dycoke", variant="official")
    b = vcast.select(x, 0.9, method="dycoke", variant="official")
    assert torch.equal(a.keep, b.keep)
    whole = set(range(0, 29, 4)) | {30}
    assert a.budgets.tolist() == [196 if t in whole else 58 for t in range(32)]
    assert a.keep.numel() == 3098
    assert vcast.select(x, 0.25, method="dycoke", variant="official", k=0.3).budgets[1] == 137  # int(0.7 * 196)


def test_release_counts_truncate_binary_floats():
    x = _video(2, 10)
    # (1 - 0.9) * 10 = 0.9999999999999998 -> 0 in both releases; the paper variant's decimal gives 1.
    assert vcast.select(x, 0.5, method="dycoke", variant="official", k=0.9).budgets.tolist() == [10, 0]
    assert vcast.select(x, 0.5, method="dycoke", variant="paper", k=0.9).budgets.tolist() == [10, 1]
    # vidcom2_qwen: K = 1 - r = 0.9, keep 1 - 0.9 -> 0 tokens at r = 0.1; the paper variant keeps 1.
    assert vcast.select(x, 0.1, method="dycoke", variant="vidcom2_qwen").budgets.tolist() == [10, 0]
    assert vcast.select(x, 0.1, method="dycoke", variant="paper").budgets.tolist() == [10, 1]
    # vidcom2_qwen with DYCOKE_K = 0.7 given: int(0.30000000000000004 * 196) = 58, r unused.
    y = _video(2, 196, dim=4)
    assert vcast.select(y, 0.9, method="dycoke", variant="vidcom2_qwen", k=0.7).budgets.tolist() == [196, 58]


@pytest.mark.parametrize("variant", ["official", "vidcom2_qwen"])
@pytest.mark.parametrize("T,budgets", [
    (1, [8]),  # kept whole (VidCom2's rule; the official code cannot run T = 1)
    (2, [8, 4]),
    (3, [8, 4, 0]),  # odd T: the last frame is dropped (the paper variant reduces it)
    (4, [8, 4, 8, 4]),  # no quad step for T <= 4
    (5, [8, 4, 4, 4, 0]),  # quad i = 0 re-reduces frame 2; frame 4 dropped
    (7, [8, 4, 4, 4, 8, 4, 0]),
    (9, [8, 4, 4, 4, 8, 4, 4, 4, 0]),  # quads i = 0, 4 (4 < T - 4 = 5)
    (8, [8, 4, 4, 4, 8, 4, 8, 4]),
])
def test_release_layout_and_odd_frames(variant, T, budgets):
    k = 0.5 if variant == "official" else None  # vidcom2_qwen: K = 1 - r = 0.5
    sel = vcast.select(_video(T, 8), 0.5, method="dycoke", variant=variant, k=k)
    assert sel.budgets.tolist() == budgets
    assert sel.keep.numel() == sum(budgets)
    assert torch.equal(sel.keep, torch.unique(sel.keep))


def test_paper_still_reduces_the_odd_last_frame():
    assert vcast.select(_video(5, 8), 0.5, method="dycoke").budgets.tolist() == [8, 4, 4, 4, 4]


def _pair_frames() -> torch.Tensor:
    # Frame 0: one vector everywhere; frame 1 at angles with cosines 1, 0, .707, -1, 1, .447.
    frame0 = [[1.0, 0.0]] * 6
    frame1 = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0], [2.0, 0.0], [1.0, 2.0]]
    return torch.tensor([frame0, frame1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_official_output_order_is_ascending_cosine(dtype):
    # k = 0.5 keeps 3 of frame 1: cosines -1 (token 3), 0 (token 1), .447 (token 5), in that order.
    x = _pair_frames().to(dtype)
    sel = vcast.select(x, 0.5, method="dycoke", variant="official", k=0.5)
    assert sel.keep.tolist() == list(range(6)) + [7, 9, 11]  # the slots, ascending
    expected = torch.cat([x[0], x[1, [3, 1, 5]]])  # the release's sequence
    assert sel.tokens.dtype == dtype and torch.equal(sel.output(x), expected)
    # vidcom2_qwen and paper keep the same set, in spatial order (pure pruning).
    for variant in ("vidcom2_qwen", "paper"):
        other = vcast.select(x, 0.5, method="dycoke", variant=variant)
        assert other.tokens is None and torch.equal(other.keep, sel.keep)
        assert torch.equal(other.output(x), torch.cat([x[0], x[1, [1, 3, 5]]]))


# bf16 pair case computed by hand. Reference a = (-0.75, 0.25); candidates b0 = (-2, 0.625) and
# b1 = 1.5 a = (-1.125, 0.375). Exactly, cos(a, b0) = 0.99982 < cos(a, b1) = 1: b0 is the less similar.
# In bf16 (8 significant bits): |a| = sqrt(0.625) -> 0.7890625, normalize(a) = (-0.94921875, 0.31640625);
# |b0| = sqrt(4.390625) -> 2.09375, normalize(b0) = (-0.95703125, 0.298828125); cosine_similarity
# renormalises (both norms round to 1.0) and sums the rounded products 0.91015625 + 0.0947265625 =
# 1.0048828125 -> 1.0078125. normalize(b1) = normalize(a), whose products give 0.90234375 +
# 0.10009765625 -> 1.0. So in bf16 b1 (1.0) ranks below b0 (1.0078125): the choice flips.
_A, _B0, _B1 = [-0.75, 0.25], [-2.0, 0.625], [-1.125, 0.375]


def test_bf16_hand_rounding_of_the_pair_case():
    assert _bf16_normalize(_A) == [-0.94921875, 0.31640625]
    assert _bf16_normalize(_B0) == [-0.95703125, 0.298828125]
    assert _bf16_cosine(_bf16_normalize(_A), _bf16_normalize(_B0)) == 1.0078125
    assert _bf16_cosine(_bf16_normalize(_A), _bf16_normalize(_B1)) == 1.0


@pytest.mark.parametrize("variant", ["official", "vidcom2_qwen"])
def test_bf16_arithmetic_flips_the_pair_choice(variant):
    x = torch.tensor([[_A, _A], [_B0, _B1]])  # T = 2, P = 2; keep n = 1 of frame 1
    k = 0.5 if variant == "official" else None
    f32 = vcast.select(x, 0.5, method="dycoke", variant=variant, k=k)
    b16 = vcast.select(x.bfloat16(), 0.5, method="dycoke", variant=variant, k=k)
    assert f32.keep.tolist() == [0, 1, 2]  # b0, the least similar in float32
    assert b16.keep.tolist() == [0, 1, 3]  # b1, the least similar in bf16
    # The paper variant scores in float32 whatever the input dtype.
    for xx in (x, x.bfloat16()):
        assert vcast.select(xx, 0.5, method="dycoke", variant="paper").keep.tolist() == [0, 1, 2]


# bf16 quad case computed by hand: frame 2 is ranked against frame 0 by cosine_similarity of the
# RAW features (no F.normalize first). Reference c = (-0.625, 0.25): |c| -> 0.671875, c/|c| =
# (-0.9296875, 0.373046875). d0 = (-1.125, 0.375): d0/|d0| = (-0.94921875, 0.31640625), products
# 0.8828125 + 0.1181640625 -> 1.0. d1 = (-1.875, 0.875): |d1| -> 2.0625, d1/|d1| = (-0.91015625,
# 0.423828125), products 0.84765625 + 0.158203125 -> 1.0078125. So d0 is the less similar
# (as in float32: 0.99827 < 0.99843); normalising first, as the pair step does, would give
# 1.0 vs 0.99609375 and pick d1.
_C, _D0, _D1 = [-0.625, 0.25], [-1.125, 0.375], [-1.875, 0.875]


def test_bf16_hand_rounding_of_the_quad_case():
    assert _bf16_cosine(_C, _D0) == 1.0 and _bf16_cosine(_C, _D1) == 1.0078125
    assert _bf16_cosine(_bf16_normalize(_C), _bf16_normalize(_D1)) == 0.99609375


@pytest.mark.parametrize("variant", ["official", "vidcom2_qwen"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_quad_step_uses_raw_cosine(variant, dtype):
    # T = 5, P = 2: quad i = 0 re-ranks frame 2 against frame 0; frame 4 is dropped.
    x = torch.tensor([[_C, _C], [_D1, _D0], [_D0, _D1], [_C, _D0], [_C, _C]]).to(dtype)
    k = 0.5 if variant == "official" else None
    sel = vcast.select(x, 0.5, method="dycoke", variant=variant, k=k)
    assert sel.budgets.tolist() == [2, 1, 1, 1, 0]
    assert torch.nonzero(sel.mask()[2]).flatten().tolist() == [0]  # d0
    # Frame 1 = (d1, d0) against frame 0 in the PAIR step (normalised first): in bf16 normalize(d1)
    # has norm 1.0078125, so its cosine is 0.99609375 < 1.0 (d0) and d1 is kept; float32 keeps d0.
    assert torch.nonzero(sel.mask()[1]).flatten().tolist() == ([0] if dtype == torch.bfloat16 else [1])


def test_official_equals_vidcom2_qwen_kept_set_at_the_same_k():
    x = _video(13, 20, seed=7).to(torch.bfloat16)
    official = vcast.select(x, 0.3, method="dycoke", variant="official", k=0.75)
    port = vcast.select(x, 0.25, method="dycoke", variant="vidcom2_qwen")  # K = 1 - 0.25
    assert torch.equal(official.keep, port.keep)
    # T = 13: pairs up to (10, 11), quads i = 0, 4, 8 -> whole 0, 4, 8; frame 12 dropped.
    assert official.budgets[-1] == 0 and official.keep.numel() == 3 * 20 + 9 * 5


@pytest.mark.parametrize("variant", ["official", "vidcom2_qwen"])
def test_release_variants_deterministic_and_bad_k(variant):
    x = _video(10, 30).to(torch.bfloat16)
    a = vcast.select(x, 0.3, method="dycoke", variant=variant)
    b = vcast.select(x.clone(), 0.3, method="dycoke", variant=variant)
    assert torch.equal(a.keep, b.keep)
    with pytest.raises(ValueError, match="k must"):
        vcast.select(x, 0.3, method="dycoke", variant=variant, k=1.5)
