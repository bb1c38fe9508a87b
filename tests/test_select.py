"""The public API: vcast.select, Selection, available_methods."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import vcast
from tests.conftest import TAU_BASE2


def test_available_methods_lists_vcast():
    assert "vcast" in vcast.available_methods()
    assert vcast.method_params("vcast")["tau"] == 0.7


def test_hand_case_paper_allocation(zigzag_video):
    # kappa = (1, 2, 2, 1) -> p = (1, 2, 2, 1)/6; B = floor(0.5 * 12) = 6 -> budgets (1, 2, 2, 1).
    # Frame 0 keeps token 0 (tie with 1 -> lower index); frame 1 tokens 0, 1; frame 2 is
    # permuted (u, u - w, u + w) so keeps 1, 2; frame 3 token 0.
    sel = vcast.select(zigzag_video, 0.5, tau=TAU_BASE2)
    assert sel.budgets.tolist() == [1, 2, 2, 1]
    assert sel.keep.tolist() == [0, 3, 4, 7, 8, 9]
    assert torch.allclose(sel.frame_weights, torch.tensor([1.0, 2.0, 2.0, 1.0]) / 6, atol=1e-5)


def test_hand_case_official_allocation(zigzag_video):
    # Same shares; the released loop gives both leftover tokens to frame 1.
    sel = vcast.select(zigzag_video, 0.5, tau=TAU_BASE2, allocation="official")
    assert sel.budgets.tolist() == [1, 3, 1, 1]
    assert sel.keep.tolist() == [0, 3, 4, 5, 7, 9]


def test_hand_case_capacity(zigzag_video):
    # tau = 0.1 puts almost all weight on frames 1 and 2; B = 9 so they are filled (3 each)
    # and the rest goes to frames 0 and 3, the tie to frame 0.
    sel = vcast.select(zigzag_video, 0.75, tau=0.1)
    assert sel.budgets.tolist() == [2, 3, 3, 1]


def test_selection_helpers(zigzag_video):
    sel = vcast.select(zigzag_video, 0.5, tau=TAU_BASE2)
    assert torch.equal(sel.gather(zigzag_video), zigzag_video.reshape(-1, 2)[sel.keep])
    assert sel.mask().sum(1).tolist() == sel.budgets.tolist()
    assert sel.num_frames == 4 and sel.tokens_per_frame == 3


@pytest.mark.parametrize("allocation", ["paper", "official"])
def test_ratio_one_keeps_everything(allocation):
    frames = torch.randn(6, 7, 5)
    sel = vcast.select(frames, 1.0, allocation=allocation)
    assert sel.keep.tolist() == list(range(42))
    assert sel.budgets.tolist() == [7] * 6


def test_bf16_input_scores_in_float32():
    frames = torch.randn(16, 24, 32, generator=torch.Generator().manual_seed(3)).bfloat16()
    a = vcast.select(frames, 0.3)
    b = vcast.select(frames.float(), 0.3)
    assert torch.equal(a.keep, b.keep) and torch.equal(a.budgets, b.budgets)
    assert a.frame_weights.dtype == torch.float32


def test_fp16_video_whose_sum_overflows_fp16_is_accepted():
    # 4M values around 1 sum to about 4e6, far beyond fp16's 65504.
    frames = (torch.randn(64, 256, 256, generator=torch.Generator().manual_seed(6)) + 1).half()
    a = vcast.select(frames, 0.25)
    b = vcast.select(frames.float(), 0.25)
    assert torch.equal(a.keep, b.keep) and torch.equal(a.budgets, b.budgets)


def test_non_contiguous_input_and_input_untouched():
    base = torch.randn(5, 8, 6, generator=torch.Generator().manual_seed(4))
    view = base.transpose(0, 1).contiguous().transpose(0, 1)  # same values, other strides
    before = base.clone()
    assert torch.equal(vcast.select(view, 0.4).keep, vcast.select(base, 0.4).keep)
    assert torch.equal(base, before)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu_with_one_sync():
    frames = torch.randn(32, 196, 256, generator=torch.Generator().manual_seed(5))
    cpu = vcast.select(frames, 0.25)
    on_gpu = frames.cuda()  # the copy from pageable memory synchronises: not the selection's
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with pytest.warns(UserWarning) as record:
            gpu = vcast.select(on_gpu, 0.25)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in record if "synchroniz" in str(w.message)]
    assert len(syncs) <= 1, [str(w.message) for w in syncs]
    assert gpu.keep.is_cuda
    assert torch.equal(gpu.budgets.cpu(), cpu.budgets)
    assert torch.equal(gpu.keep.cpu(), cpu.keep)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("ratio", [0, -0.1, 1.5, float("nan"), "0.5", True])
def test_bad_ratio(ratio):
    with pytest.raises(ValueError, match="ratio"):
        vcast.select(torch.randn(2, 3, 4), ratio)


@pytest.mark.parametrize(
    "shape, pattern",
    [((3, 4), r"3-D.*\(3, 4\)"), ((2, 3, 4, 5), "3-D"), ((0, 3, 4), "T = 0"), ((2, 0, 4), "P = 0"), ((2, 3, 0), "D = 0")],
)
def test_bad_shape(shape, pattern):
    with pytest.raises(ValueError, match=pattern):
        vcast.select(torch.randn(shape), 0.5)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_frames(bad):
    frames = torch.randn(3, 4, 5)
    frames[1, 2, 3] = bad
    with pytest.raises(ValueError, match="1 non-finite"):
        vcast.select(frames, 0.5)


def test_integer_frames_and_non_tensor():
    with pytest.raises(ValueError, match="floating-point.*int64"):
        vcast.select(torch.ones(2, 3, 4, dtype=torch.long), 0.5)
    with pytest.raises(TypeError, match="list"):
        vcast.select([[[1.0]]], 0.5)


@pytest.mark.parametrize(
    "params, pattern",
    [
        ({"k_min": 4}, r"k_min must be \[0, 3\], got 4"),
        ({"k_min": -1}, "k_min"),
        ({"k_min": 1.5}, "k_min must be an integer"),
        ({"tau": 0}, "tau must be > 0, got 0"),
        ({"tau": -1.0}, "tau"),
        ({"tau": float("inf")}, "tau"),
        ({"allocation": "hamilton"}, "allocation.*'hamilton'"),
        ({"temporal": "motion"}, "temporal.*'motion'"),
        ({"spatial": "saliency"}, "spatial.*'saliency'"),
        ({"weights": (1.0, -1.0)}, "weights"),
        ({"weights": (0, 0)}, "weights"),
        ({"weights": (1.0,)}, "weights"),
        ({"seed": -3}, "seed"),
        ({"temperature": 0.5}, "unknown parameter.*'temperature'.*'vcast'"),
    ],
)
def test_bad_params(params, pattern):
    with pytest.raises(ValueError, match=pattern):
        vcast.select(torch.randn(2, 3, 4), 0.5, **params)


def test_unknown_method():
    with pytest.raises(ValueError, match="unknown method 'nope'.*vcast"):
        vcast.select(torch.randn(2, 3, 4), 0.5, method="nope")


# ----------------------------------------------------------------------------- properties


def paper_budget(ratio: float, frames: int, tokens: int, k_min: int) -> int:
    return max(math.floor(Decimal(repr(ratio)) * frames * tokens), frames * k_min)


@st.composite
def videos(draw):
    t, p, d = draw(st.integers(1, 10)), draw(st.integers(1, 12)), draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    generator = torch.Generator().manual_seed(seed)
    if draw(st.booleans()):  # few distinct values: many exact ties in every score
        frames = torch.randint(-2, 3, (t, p, d), generator=generator).float()
    else:
        frames = torch.randn(t, p, d, generator=generator) * draw(st.sampled_from([1e-3, 1.0, 1e3]))
    return frames


@settings(max_examples=250, deadline=None)
@given(
    frames=videos(),
    ratio=st.floats(0.001, 1.0),
    k_min=st.integers(0, 3),
    allocation=st.sampled_from(["paper", "official"]),
    temporal=st.sampled_from(["curvature", "uniform", "random", "uniqueness"]),
    spatial=st.sampled_from(["dual_anchor", "diversity", "activation"]),
)
def test_selection_invariants(frames, ratio, k_min, allocation, temporal, spatial):
    t, p, _ = frames.shape
    k_min = min(k_min, p)
    params = dict(k_min=k_min, allocation=allocation, temporal=temporal, spatial=spatial)
    sel = vcast.select(frames, ratio, **params)
    keep, budgets = sel.keep, sel.budgets
    assert keep.dtype == torch.long and budgets.dtype == torch.long
    assert keep.numel() == int(budgets.sum())
    if allocation == "paper":
        assert int(budgets.sum()) == paper_budget(ratio, t, p, k_min)
    assert int(budgets.min()) >= k_min and int(budgets.max()) <= p
    assert bool((keep[1:] > keep[:-1]).all()), "keep must be strictly ascending (so unique)"
    assert keep.numel() == 0 or (int(keep.min()) >= 0 and int(keep.max()) < t * p)
    assert torch.bincount(keep // p, minlength=t).tolist() == budgets.tolist()
    again = vcast.select(frames.clone(), ratio, **params)
    assert torch.equal(again.keep, keep) and torch.equal(again.budgets, budgets)
    everything = vcast.select(frames, 1.0, **params)
    assert everything.keep.tolist() == list(range(t * p))
