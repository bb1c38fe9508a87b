"""DyCoke TTM's released arithmetic, shared by ``variant="official"`` and ``variant="vidcom2_qwen"``.

Both variants run :func:`release_order` (:mod:`baselines.dycoke.official`,
:mod:`baselines.dycoke.vidcom2_qwen`; the package docstring of :mod:`baselines.dycoke` lists what
each variant follows and its deviations). On ``frames`` [T, P, D]:

* pairs (i, i+1), i = 0, 2, ... < T-1: frame i whole; frame i+1 keeps the ``n`` tokens with the
  lowest ``cosine_similarity(normalize(X_i), normalize(X_i+1))`` per spatial position (the
  vectors are L2-normalised twice: once by ``F.normalize``, once inside ``cosine_similarity``);
* quads, i = 0, 4, ... < T-4: frame i+2 is re-ranked against frame i with
  ``cosine_similarity(X_i, X_i+2)`` on the raw features (no ``F.normalize`` here);
* odd T: the loops never reach frame T-1, which is dropped (0 tokens);
* the ``n`` lowest come from ``topk(n, largest=False)`` on each frame's own 1-D cosine row,
  which fixes the tie order and, in the official variant, the output order (ascending cosine).

All of it runs in the input dtype (bf16 in, bf16 normalise / cosine / topk), one torch call per
frame exactly as the release calls them, on the release's flat ``[T * P, D]`` slices, so the
same torch build gives the same bits on the same device.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)


def _lowest(similarity: torch.Tensor, keep_n: int) -> torch.Tensor:
    """Indices of the ``keep_n`` lowest of a 1-D row, in ``topk(largest=False)`` order: [n]."""
    if keep_n <= 0:
        return torch.empty(0, dtype=torch.long, device=similarity.device)
    return similarity.topk(min(keep_n, similarity.numel()), largest=False).indices


def release_order(frames: torch.Tensor, keep_n: int) -> torch.Tensor:
    """Flat source indices of the released TTM output, in its output order: LongTensor [K].

    Args:
        frames: [T, P, D] in the model dtype; T = 1 keeps the frame whole (the VidCom2 port's
            rule; the official code cannot run it). For T <= 4 the quad step is empty.
        keep_n: tokens a reduced frame keeps.
    Returns:
        LongTensor [K]: frame by frame in frame order; a whole frame in token order, a reduced
        frame in ascending-cosine (``topk``) order; the last frame of an odd T absent.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    device = frames.device
    if num_frames == 1:
        return torch.arange(tokens_per_frame, device=device)
    flat = frames.reshape(num_frames * tokens_per_frame, dim)  # the release slices one flat tensor

    def rows(t: int) -> torch.Tensor:
        return flat[t * tokens_per_frame:(t + 1) * tokens_per_frame]

    def span(t: int) -> torch.Tensor:
        return torch.arange(t * tokens_per_frame, (t + 1) * tokens_per_frame, device=device)

    slots: list[torch.Tensor] = []  # slot t = frame t's output, as the release's list
    for i in range(0, num_frames - 1, 2):
        first, second = F.normalize(rows(i), p=2, dim=1), F.normalize(rows(i + 1), p=2, dim=1)
        sim = F.cosine_similarity(first, second, dim=1)  # normalised twice, as released
        slots.append(span(i))
        slots.append(_lowest(sim, keep_n) + (i + 1) * tokens_per_frame)
    for i in range(0, num_frames - 4, 4):
        sim = F.cosine_similarity(rows(i), rows(i + 2), dim=1)  # raw features, unlike the pairs
        slots[i + 2] = _lowest(sim, keep_n) + (i + 2) * tokens_per_frame
    order = torch.cat(slots)
    logger.debug("dycoke release TTM: T=%d P=%d n=%d -> %d tokens%s", num_frames, tokens_per_frame, keep_n,
                 order.numel(), " (odd T: last frame dropped)" if num_frames % 2 else "")
    return order
