"""Curvature and the temporal densities."""

from __future__ import annotations

import math

import pytest
import torch

from vcast.synthetic_features import synthetic_video_features
from vcast.temporal import curvature, temporal_weights, uniqueness_weights, unit_directions


def directions(angles_deg: list[float]) -> torch.Tensor:
    a = torch.tensor([math.radians(x) for x in angles_deg])
    return torch.stack([torch.cos(a), torch.sin(a)], dim=1)


def test_boundary_frames_have_curvature_one():
    kappa = curvature(directions([0, 10, 20, 30, 40]))
    assert kappa[0] == pytest.approx(1.0) and kappa[-1] == pytest.approx(1.0)


def test_constant_turn_on_a_circle():
    # Equal steps of 20 degrees: consecutive chords turn by 20 degrees, kappa = 1 - cos 20deg.
    kappa = curvature(directions([0, 20, 40, 60, 80]))
    expected = 1 - math.cos(math.radians(20))
    assert torch.allclose(kappa[1:-1], torch.full((3,), expected), atol=1e-5)


def test_reversal_has_curvature_two():
    kappa = curvature(directions([0, 90, 0, 90]))
    assert torch.allclose(kappa, torch.tensor([1.0, 2.0, 2.0, 1.0]), atol=1e-5)


def test_straight_line_has_zero_interior_curvature():
    points = torch.tensor([[1.0, t] for t in range(5)])  # collinear, equally spaced
    kappa = curvature(points)
    assert torch.allclose(kappa[1:-1], torch.zeros(3), atol=1e-6)


def test_single_frame_and_static_video():
    assert curvature(directions([30])).tolist() == [1.0]
    static = directions([10, 10, 10])  # zero steps: cosine 0, kappa 1 everywhere
    assert torch.allclose(curvature(static), torch.ones(3))


def test_unit_directions_ignore_magnitude():
    means = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    units = unit_directions(means)
    assert torch.allclose(units[0], torch.tensor([0.6, 0.8]))
    assert torch.equal(units[1], torch.zeros(2))  # eps keeps a zero mean finite


@pytest.mark.parametrize("strategy", ["curvature", "uniform", "random", "uniqueness"])
def test_weights_are_a_density(strategy):
    frames = torch.randn(9, 5, 6, generator=torch.Generator().manual_seed(1))
    p = temporal_weights(strategy, frames, frames.mean(1), 0.7, seed=3)
    assert p.shape == (9,) and bool((p > 0).all())
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-5)


def test_random_strategy_is_seeded():
    frames = torch.randn(12, 4, 3)
    draw = lambda seed: temporal_weights("random", frames, frames.mean(1), 0.7, seed)  # noqa: E731
    assert torch.equal(draw(5), draw(5))
    assert not torch.equal(draw(5), draw(6))


def test_uniqueness_favours_a_planted_distinct_frame():
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(1, 16, 32, generator=generator)
    frames = base + 0.05 * torch.randn(10, 16, 32, generator=generator)
    frames[6] = torch.randn(16, 32, generator=generator)  # the one frame unlike the rest
    p = uniqueness_weights(frames)
    assert int(p.argmax()) == 6
    # VidCom2's rule p_t = (1 + q_t - 1/T) / T: recover q, a softmax at temperature 0.01 that
    # should be nearly one-hot on the planted frame.
    # Every frame keeps at least (1 - 1/T)/T of the budget, and the unique one almost twice that.
    q = p * 10 - 1 + 1 / 10
    assert float(q.min()) >= -1e-6 and float(q[6]) > 0.9
    assert float(p.min()) >= (1 - 1 / 10) / 10 - 1e-6


def test_curvature_peaks_at_planted_events():
    video = synthetic_video_features(num_frames=24, scene_cuts=(16,), event_start=7, event_length=2, seed=0)
    kappa = curvature(unit_directions(video.features.mean(1)))
    interior = kappa[1:-1]
    top = set((torch.topk(interior, 6).indices + 1).tolist())
    # Turns happen on entering/leaving the object (frames 6-9) and around the cut (15, 16).
    assert top <= {6, 7, 8, 9, 15, 16}, top
