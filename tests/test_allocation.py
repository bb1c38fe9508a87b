"""Per-frame budgets: hand-computed cases, and both allocators against literal references."""

from __future__ import annotations

import math
from fractions import Fraction

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vcast.allocation import allocate_official, allocate_paper, capped_proportional_shares


def reference_paper(weights: list[float], total: int, tokens: int, k_min: int) -> list[int]:
    """The paper rule as the issue states it, in exact rational arithmetic, with the
    re-apportioning loop written out."""
    n = len(weights)
    w = [Fraction(x) for x in weights]
    rest, capacity = total - n * k_min, tokens - k_min
    shares: list[Fraction | None] = [None] * n
    remaining = Fraction(rest)
    while True:
        active = [t for t in range(n) if shares[t] is None]
        weight_sum = sum(w[t] for t in active)
        over = [t for t in active if remaining * w[t] > capacity * weight_sum]
        if not over:
            for t in active:
                shares[t] = remaining * w[t] / weight_sum
            break
        for t in over:
            shares[t] = Fraction(capacity)
            remaining -= capacity
    floors = [math.floor(s) for s in shares]
    leftover = rest - sum(floors)
    # Remainders are compared to 9 decimals (half to even, like torch.round); ties -> lower frame.
    remainders = [round((shares[t] - floors[t]) * 10**9) for t in range(n)]
    by_remainder = sorted(range(n), key=lambda t: (-remainders[t], t))
    budgets = [k_min + f for f in floors]
    for t in by_remainder[:leftover]:
        budgets[t] += 1
    return budgets


def reference_official(weights: torch.Tensor, total: int, tokens: int, k_min: int) -> list[int]:
    """The released ``_allocate_budget_per_frame``, transcribed with its token-by-token loop."""
    n = weights.numel()
    p = weights.float().clamp_min(0)
    p = p / p.sum()
    rest = total - n * k_min
    raw = p * rest
    budgets = [k_min + min(int(torch.floor(raw[t])), tokens - k_min) for t in range(n)]
    frac = [float(raw[t] - torch.floor(raw[t])) if budgets[t] < tokens else -1.0 for t in range(n)]
    for _ in range(total - sum(budgets)):
        best = max(range(n), key=lambda t: (frac[t], -t))  # argmax, first index on ties
        if frac[best] < 0:
            break
        budgets[best] += 1
        if budgets[best] >= tokens:
            frac[best] = -1.0
    return budgets


def test_paper_hand_case_largest_remainder():
    # p = (1, 2, 2, 1) / 6, B = 6, k_min = 1: R = 2, shares (1/3, 2/3, 2/3, 1/3), floors 0,
    # the two leftover tokens go to the two largest remainders (frames 1 and 2).
    weights = torch.tensor([1.0, 2.0, 2.0, 1.0]) / 6
    assert allocate_paper(weights, 6, 3, 1).tolist() == [1, 2, 2, 1]


def test_paper_hand_case_capacity_refill():
    # p ~ (0, 1/2, 1/2, 0), B = 9, P = 3, k_min = 1: R = 5 and capacity 2. Frames 1 and 2 ask
    # for 2.5 each, are filled to 2, and the remaining 1 token is re-apportioned over frames 0
    # and 3 (0.5 each); the remainder tie goes to the lower index.
    weights = torch.tensor([1e-6, 1.0, 1.0, 1e-6])
    assert allocate_paper(weights, 9, 3, 1).tolist() == [2, 3, 3, 1]


def test_official_hand_case_piles_leftover_on_one_frame():
    # Same input as the largest-remainder case: the released loop gives frame 1 the first
    # leftover token and, since its fraction is only retired once the frame is full, the second.
    weights = torch.tensor([1.0, 2.0, 2.0, 1.0]) / 6
    assert allocate_official(weights, 6, 3, 1).tolist() == [1, 3, 1, 1]


def test_official_pile_up_documented_example():
    # README example: T=8, P=100, B=200 (r=0.25), k_min=1, kappa below, tau=0.7.
    # 192 * p = (39.54, 12.61, 15.62, 34.28, 14.55, 13.54, 22.33, 39.54): the floors plus k_min
    # sum to 196, so 4 tokens are left over. The paper rule gives one each to the four largest
    # remainders (frames 2, 1, 4, 5); the released loop gives all four to frame 2.
    kappa = torch.tensor([1.0, 0.2, 0.35, 0.9, 0.3, 0.25, 0.6, 1.0])
    weights = torch.softmax(kappa / 0.7, dim=0)
    assert allocate_paper(weights, 200, 100, 1).tolist() == [40, 14, 17, 35, 16, 15, 23, 40]
    assert allocate_official(weights, 200, 100, 1).tolist() == [40, 13, 20, 35, 15, 14, 23, 40]


def test_remainders_equal_to_nine_decimals_are_ties():
    # Frames 4-6 share 4 tokens as (10/3, 1/3, 1/3) in decimal terms; in binary 0.01 is not
    # 10 * 0.001, so float64 alone would hand the leftover to frame 5. The tie goes to frame 4.
    weights = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.01, 0.001, 0.001], dtype=torch.float64)
    assert allocate_paper(weights, 20, 4, 0).tolist() == [4, 4, 4, 4, 4, 0, 0]


def test_shares_respect_capacity_and_sum():
    shares = capped_proportional_shares(torch.tensor([10.0, 1.0, 1.0, 0.0]), 7, 3)
    assert torch.allclose(shares, torch.tensor([3.0, 2.0, 2.0, 0.0], dtype=torch.float64), atol=1e-9)


def test_zero_weights_after_underflow_still_get_the_remainder():
    # A softmax with a tiny temperature underflows to exact zeros; the frames with weight 1 are
    # full (capacity 2), so the other 2 tokens must still be placed.
    weights = torch.tensor([0.0, 1.0, 0.0, 0.0])
    budgets = allocate_paper(weights, 6, 3, 0)
    assert budgets.tolist() == [1, 3, 1, 1]


weights_strategy = st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=12)


@settings(max_examples=1000, deadline=None)
@given(weights=weights_strategy, tokens=st.integers(1, 20), k_min=st.integers(0, 20), fill=st.floats(0, 1), dup=st.booleans())
def test_paper_matches_exact_iterative_reference(weights, tokens, k_min, fill, dup):
    if dup:  # equal weights make exact remainder ties
        weights = weights[: max(1, len(weights) // 2)] * 2
    k_min = min(k_min, tokens)
    n = len(weights)
    total = n * k_min + round(fill * n * (tokens - k_min))
    w = torch.tensor(weights, dtype=torch.float64)
    budgets = allocate_paper(w, total, tokens, k_min)
    assert budgets.tolist() == reference_paper(weights, total, tokens, k_min)
    assert int(budgets.sum()) == total
    assert int(budgets.min()) >= k_min and int(budgets.max()) <= tokens


@settings(max_examples=300, deadline=None)
@given(kappa=st.lists(st.floats(0, 2), min_size=1, max_size=40), tokens=st.integers(1, 300), k_min=st.integers(0, 2), ratio=st.floats(0.01, 1.0))
def test_official_matches_transcribed_loop(kappa, tokens, k_min, ratio):
    from vcast.budget import official_total_budget

    k_min = min(k_min, tokens)
    weights = torch.softmax(torch.tensor(kappa) / 0.7, dim=0)
    total = official_total_budget(ratio, len(kappa), tokens, k_min)
    budgets = allocate_official(weights, total, tokens, k_min)
    assert budgets.tolist() == reference_official(weights, total, tokens, k_min)
    assert int(budgets.sum()) == total
