"""Dual-anchor scores and the per-frame top-b_t selection."""

from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import frame_tokens_2d
from vcast.frame_stats import frame_stats
from vcast.spatial import spatial_scores, top_per_frame


def test_dual_anchor_scores_by_hand():
    frames = frame_tokens_2d(0, (0, 1, 2)).unsqueeze(0)  # tokens (1,1), (1,-1), (1,0); mean (1,0)
    scores = spatial_scores(frame_stats(frames))
    diversity = 1 - 1 / math.sqrt(2)  # cosine of (1, +-1) with (1, 0)
    activation = (math.sqrt(2) - 1) / (math.sqrt(2) - 1 + 1e-6)  # min-max of norms sqrt2, sqrt2, 1
    expected = torch.tensor([[diversity + activation, diversity + activation, 0.0]])
    assert torch.allclose(scores, expected, atol=1e-5)


def test_single_anchor_scorers_and_weights():
    frames = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])  # mean (1, 2/3)
    stats = frame_stats(frames)
    diversity = spatial_scores(stats, "diversity")
    activation = spatial_scores(stats, "activation")
    mean = frames[0].mean(0)
    cos = frames[0] @ mean / (frames[0].norm(dim=1) * mean.norm() + 1e-6)
    norms = frames[0].norm(dim=1)
    assert torch.allclose(diversity[0], 1 - cos, atol=1e-6)
    assert torch.allclose(activation[0], (norms - norms.min()) / (norms.max() - norms.min() + 1e-6), atol=1e-6)
    weighted = spatial_scores(stats, "dual_anchor", (2.0, 0.5))
    assert torch.allclose(weighted, 2.0 * diversity + 0.5 * activation, atol=1e-6)


def test_unknown_scorer():
    with pytest.raises(ValueError, match="'sharpness'"):
        spatial_scores(frame_stats(torch.randn(2, 3, 4)), "sharpness")


def test_top_per_frame_ties_go_to_lower_index_and_output_is_ascending():
    scores = torch.tensor([[1.0, 5.0, 5.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 2.0, 3.0]])
    keep = top_per_frame(scores, torch.tensor([1, 2, 4]), 7)
    # frame 0: the 5.0 tie -> index 1; frame 1: all tied -> 0, 1; frame 2: everything.
    assert keep.tolist() == [1, 4, 5, 8, 9, 10, 11]


def test_top_per_frame_zero_budget_frame():
    keep = top_per_frame(torch.tensor([[3.0, 1.0], [1.0, 3.0]]), torch.tensor([0, 1]), 1)
    assert keep.tolist() == [3]


def test_frame_stats_blocks_agree_with_one_pass():
    frames = torch.randn(7, 5, 11, generator=torch.Generator().manual_seed(0))
    whole = frame_stats(frames, block_elements=10**9)
    for dtype in (torch.float32, torch.bfloat16):
        x = frames.to(dtype)
        one = frame_stats(x, block_elements=10**9)
        blocks = frame_stats(x, block_elements=2 * 5 * 11)  # two frames per block, 4 blocks
        for a, b in ((one.means, blocks.means), (one.norms, blocks.norms), (one.dots, blocks.dots)):
            torch.testing.assert_close(a, b)
    torch.testing.assert_close(whole.means, frames.mean(1))
    torch.testing.assert_close(whole.norms, frames.norm(dim=-1))
    torch.testing.assert_close(whole.dots, torch.einsum("tpd,td->tp", frames, frames.mean(1)))
