"""Temporal densities ``p`` [T]: how the budget is spread over frames.

* ``curvature`` (V-CAST): softmax of the curvature of the trajectory of unit frame means.
* ``uniform``: equal weights.
* ``random``: i.i.d. U[0, 2) scores (the range of the curvature) through the same softmax, seeded.
* ``uniqueness``: VidCom2's global frame uniqueness, with its budget rule
  ``scale_t ~ 1 + q_t - 1/T`` turned into a density.
"""

from __future__ import annotations

import torch

TEMPORAL_STRATEGIES = ("curvature", "uniform", "random", "uniqueness")

EPS = 1e-6
# VidCom2's constants (xuyang-liu16/VidCom2@944a17d token_compressor/vidcom2/vidcom2.py,
# vidcom2_compression L15-36).
UNIQUENESS_TEMPERATURE = 0.01
UNIQUENESS_SCALES = (0.125, 0.25, 0.5, 1.0, 2.0)
UNIQUENESS_CHANNEL_FRACTION = 0.5


def cosine(a: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """``a.b / (|a| |b| + eps)`` over the last dim (the paper's definition); zero vectors give 0."""
    dot = (a * b).sum(-1)
    return dot / (torch.linalg.vector_norm(a, dim=-1) * torch.linalg.vector_norm(b, dim=-1) + eps)


def unit_directions(frame_means: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """``x_hat_t = x_bar_t / max(|x_bar_t|, eps)``: [T, D] -> [T, D]."""
    norms = torch.linalg.vector_norm(frame_means, dim=-1, keepdim=True)
    return frame_means / norms.clamp_min(eps)


def curvature(directions: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Semantic curvature ``kappa_t = 1 - cos(v_in, v_out)``: [T, D] -> [T].

    Indices are clamped at both ends (``x_hat_{-1} = x_hat_0``, ``x_hat_T = x_hat_{T-1}``), so a
    boundary frame has a zero difference vector and ``kappa = 1`` there.
    """
    padded = torch.cat([directions[:1], directions, directions[-1:]], dim=0)
    steps = padded[1:] - padded[:-1]  # [T + 1, D]: steps[t] = x_hat_t - x_hat_{t-1}
    return 1.0 - cosine(steps[:-1], steps[1:], eps)


def low_variance_unit_tokens(frames: torch.Tensor) -> torch.Tensor:
    """VidCom2's token view: [T, P, D] -> [T, P, C] float32.

    Keeps the ``C = max(1, int(D / 2))`` channels with the lowest population variance over all
    ``T * P`` tokens (ties to the lower channel) and L2-normalises each token on them.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    flat = frames.reshape(-1, dim).float()
    keep_channels = max(1, int(dim * UNIQUENESS_CHANNEL_FRACTION))
    variance = flat.var(dim=0, unbiased=False)
    channels = torch.sort(variance, stable=True).indices[:keep_channels]
    tokens = torch.nn.functional.normalize(flat[:, channels], dim=-1, eps=EPS)
    return tokens.view(num_frames, tokens_per_frame, keep_channels)


def multiscale_gaussian_similarity(tokens: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
    """``S(x, c) = sum_a exp(-|x - c|^2 / 2a)`` over VidCom2's scales: tokens [..., C] and a
    broadcastable centre [..., C] -> [...]."""
    sq_dist = (tokens - centre).pow(2).sum(-1)
    return sum(torch.exp(-sq_dist / (2 * a)) for a in UNIQUENESS_SCALES)


def video_centre_similarity(tokens: torch.Tensor) -> torch.Tensor:
    """``v_ti = S(x_ti, c_v)`` [T, P] for tokens [T, P, C] from :func:`low_variance_unit_tokens`;
    the video centre ``c_v`` is the mean of all tokens (not renormalised)."""
    flat = tokens.reshape(-1, tokens.shape[-1])
    centre = flat.mean(dim=0, keepdim=True)
    return multiscale_gaussian_similarity(flat, centre).view(tokens.shape[:2])


def uniqueness_softmax(video_similarity: torch.Tensor) -> torch.Tensor:
    """VidCom2's frame uniqueness ``q`` [T]: ``u_t = -mean_i v_ti``,
    ``q = softmax((u - max u) / 0.01)``, from ``v`` [T, P]."""
    uniqueness = -video_similarity.mean(-1)
    return torch.softmax((uniqueness - uniqueness.max()) / UNIQUENESS_TEMPERATURE, dim=0)


def uniqueness_weights(frames: torch.Tensor) -> torch.Tensor:
    """VidCom2-style global frame uniqueness as a density: [T, P, D] -> [T] float32.

    Keeps the ``max(1, int(D / 2))`` lowest-variance channels (population variance over all
    tokens, ties to the lower channel), L2-normalises each token on them, scores each token by
    its multi-scale Gaussian similarity to the video centre ``S(x, c) = sum_a exp(-|x - c|^2 / 2a)``,
    ``u_t = -mean_i S``, ``q = softmax((u - max u) / 0.01)``; VidCom2's per-frame scale is
    ``r (1 + q_t - 1/T)``, which as a density is ``(1 + q_t - 1/T) / T``.
    """
    num_frames = frames.shape[0]
    q = uniqueness_softmax(video_centre_similarity(low_variance_unit_tokens(frames)))
    return (1 + q - 1 / num_frames) / num_frames


def temporal_weights(
    strategy: str, frames: torch.Tensor, frame_means: torch.Tensor, tau: float, seed: int
) -> torch.Tensor:
    """Density ``p`` [T] (float32, sums to 1).

    Args:
        strategy: one of :data:`TEMPORAL_STRATEGIES`.
        frames: [T, P, D] tokens, any float dtype.
        frame_means: [T, D] float32 per-frame means.
        tau: softmax temperature for ``curvature`` and ``random``.
        seed: seed of the ``random`` strategy (drawn on the CPU, so any device gives the same).
    """
    num_frames = frames.shape[0]
    if strategy == "curvature":
        return torch.softmax(curvature(unit_directions(frame_means)) / tau, dim=0)
    if strategy == "uniform":
        return torch.full((num_frames,), 1.0 / num_frames, device=frames.device)
    if strategy == "random":
        generator = torch.Generator().manual_seed(seed)
        scores = 2.0 * torch.rand(num_frames, generator=generator)
        return torch.softmax(scores / tau, dim=0).to(frames.device)
    if strategy == "uniqueness":
        return uniqueness_weights(frames)
    raise ValueError(f"temporal must be one of {TEMPORAL_STRATEGIES}; got {strategy!r}")
