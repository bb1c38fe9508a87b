"""EVS (baselines/simple/evs.py): known-answer selections, its budget rule in both variants, the dtypes."""

from __future__ import annotations

import math

import pytest
import torch

import vcast
from baselines.simple.evs import evs_budget, evs_dissimilarity

# Unit vectors of the plane: their cosines are exact in float32 and bf16.
E1, E2 = [1.0, 0.0], [0.0, 1.0]
NEG1 = [-1.0, 0.0]


def known_video() -> torch.Tensor:
    """T=3, P=4, D=2. Frame 1 turns token 2 by 90 degrees (1 - cos = 1) and flips token 3
    (1 - cos = 2); frame 2 turns token 0 by 45 degrees (1 - cos = 1 - 1/sqrt 2 ~ 0.29). Every
    other token equals the same cell of the previous frame (1 - cos = 0)."""
    frame0 = [E1, E2, E1, E1]
    frame1 = [E1, E2, E2, NEG1]
    frame2 = [[1.0, 1.0], E2, E2, NEG1]
    return torch.tensor([frame0, frame1, frame2])


def test_dissimilarity_is_one_minus_the_cosine_to_the_previous_frame() -> None:
    scores = evs_dissimilarity(known_video())
    assert torch.isinf(scores[0]).all()
    expected = torch.tensor([[0.0, 0.0, 1.0, 2.0], [1 - 1 / math.sqrt(2), 0.0, 0.0, 0.0]])
    assert torch.allclose(scores[1:], expected, atol=1e-6)


# (ratio, kept flat indices): frame 0 whole, then by falling 1 - cos, then ties by lower index.
KNOWN = [
    (0.05, [0, 1, 2, 3]),              # floor(0.6) = 0, raised to one frame (P = 4)
    (0.5, [0, 1, 2, 3, 6, 7]),         # 6: the two changed tokens of frame 1 (2 > 1)
    (0.59, [0, 1, 2, 3, 6, 7, 8]),     # floor(7.08) = 7: + frame 2 token 0 (0.29)
    (0.67, [0, 1, 2, 3, 4, 6, 7, 8]),  # floor(8.04) = 8: + the first zero-score token, flat index 4
    (1.0, list(range(12))),
]


@pytest.mark.parametrize("ratio, expected", KNOWN)
def test_known_video_keeps_frame_zero_then_the_largest_changes(ratio: float, expected: list[int]) -> None:
    for variant in ("paper", "official"):
        selection = vcast.select(known_video(), ratio, method="evs", variant=variant)
        assert selection.keep.tolist() == expected, variant
        assert selection.budgets.tolist() == [sum(1 for i in expected if i // 4 == t) for t in range(3)]


# (T, P, r) -> (paper, official): floor of the decimal r T P vs vLLM's int(T P (1 - (1 - r))),
# both raised to P; the cases where binary rounding of 1 - (1 - r) drops a token.
BUDGETS = [((8, 16, 0.25), (32, 32)), ((3, 4, 0.05), (4, 4)), ((6, 5, 0.2), (6, 5)), ((6, 10, 0.2), (12, 11)),
           ((5, 18, 0.7), (63, 62)), ((4, 49, 0.15), (49, 49)), ((1, 7, 0.3), (7, 7))]


@pytest.mark.parametrize("shape, counts", BUDGETS)
def test_budget_keeps_a_frame_and_follows_each_variants_arithmetic(shape: tuple, counts: tuple) -> None:
    num_frames, tokens_per_frame, ratio = shape
    assert evs_budget(ratio, num_frames, tokens_per_frame, "paper") == counts[0]
    assert evs_budget(ratio, num_frames, tokens_per_frame, "official") == counts[1]
    frames = torch.randn(num_frames, tokens_per_frame, 8, generator=torch.Generator().manual_seed(0))
    for variant, count in zip(("paper", "official"), counts):
        assert vcast.select(frames, ratio, method="evs", variant=variant).keep.numel() == count


def test_a_single_frame_is_kept_whole() -> None:
    frames = torch.randn(1, 9, 4)
    assert vcast.select(frames, 0.25, method="evs").keep.tolist() == list(range(9))


def test_paper_computes_in_float32_and_official_in_the_input_dtype() -> None:
    """A near-static bf16 video (changes of ~1e-3, where bf16 rounding reorders them): the paper
    variant equals its float32 copy; the official one ranks cosines computed in bf16, as vLLM does
    in the model's dtype, and so keeps other tokens."""
    generator = torch.Generator().manual_seed(3)
    still = torch.randn(1, 36, 64, generator=generator)
    frames = (still + 0.05 * torch.randn(12, 36, 64, generator=generator)).to(torch.bfloat16)
    paper = vcast.select(frames, 0.25, method="evs")
    assert torch.equal(paper.keep, vcast.select(frames.float(), 0.25, method="evs").keep)
    official = vcast.select(frames, 0.25, method="evs", variant="official")
    scores = torch.cat([torch.full((1, 36), 255.0, dtype=torch.bfloat16),
                        1 - torch.nn.functional.cosine_similarity(frames[1:], frames[:-1], dim=-1)])
    order = torch.argsort(scores.reshape(-1), descending=True, stable=True)
    assert official.keep.tolist() == sorted(order[:official.keep.numel()].tolist())
    assert not torch.equal(official.keep, paper.keep)


def test_unknown_variant_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'vidcom2_qwen'"):
        vcast.select(known_video(), 0.5, method="evs", variant="vidcom2_qwen")
