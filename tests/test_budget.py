"""Total budget B: the paper's floor and the released code's round."""

import pytest

from vcast.budget import official_total_budget, paper_total_budget


@pytest.mark.parametrize(
    "ratio, frames, tokens, k_min, expected",
    [
        (0.25, 4, 3, 1, 4),  # floor(3.0) = 3, raised to T * k_min = 4
        (0.5, 4, 3, 1, 6),
        (0.25, 32, 196, 1, 1568),
        (0.29, 10, 10, 0, 29),  # 0.29 * 100 is 28.999... in binary; the decimal floor is 29
        (0.35, 10, 7, 0, 24),  # floor(24.5)
        (1.0, 5, 7, 3, 35),
        (0.01, 3, 10, 0, 0),
    ],
)
def test_paper_budget_is_floor_of_decimal_ratio(ratio, frames, tokens, k_min, expected):
    assert paper_total_budget(ratio, frames, tokens, k_min) == expected


@pytest.mark.parametrize(
    "ratio, frames, tokens, k_min, expected",
    [
        (0.25, 2, 3, 0, 2),  # round(1.5) = 2 (half to even)
        (0.25, 2, 5, 0, 2),  # round(2.5) = 2 (half to even), the paper's floor also gives 2
        (0.35, 10, 7, 0, 24),  # round(24.5) = 24
        (0.45, 10, 7, 0, 32),  # round(31.5) = 32
        (0.01, 3, 10, 0, 1),  # clipped up to 1
        (0.01, 3, 10, 1, 3),  # raised to T * k_min
        (1.0, 5, 7, 1, 35),
    ],
)
def test_official_budget_rounds_half_to_even_and_clips(ratio, frames, tokens, k_min, expected):
    assert official_total_budget(ratio, frames, tokens, k_min) == expected
