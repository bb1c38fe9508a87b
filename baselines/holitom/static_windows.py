"""HoliTom's global temporal segmentation: the dynamic programme over static windows (official
``select_static_windows``), used by every ``holitom`` variant.

A window ``[s, e]`` has the static positions ``S(s, e)`` (``phi[k, i] > tau`` for every
``s <= k < e``) and the benefit ``|S(s, e)| * (e - s)`` (the removable copies);
``dp[i] = max(dp[i-1], max_{w=2..min(i+1, max_window)} dp[i-w] + benefit(i-w+1, i))`` with strict
``>`` (ties keep the single frame, then the smaller window). The DP runs on integer benefits (the
official float32 values are the same integers below 2**24).
"""

from __future__ import annotations

import torch


def static_window_benefits(above: torch.Tensor) -> list[list[int]]:
    """``benefit[s][e] = |S(s, e)| * (e - s)`` for ``s < e`` (0 otherwise).

    Args:
        above: BoolTensor [T-1, P] (CPU), ``phi > tau``.
    Returns:
        [T][T] nested list of ints.
    """
    num_frames = above.shape[0] + 1
    benefit = torch.zeros(num_frames, num_frames, dtype=torch.long)
    lengths = torch.arange(1, num_frames, dtype=torch.long)
    for start in range(num_frames - 1):  # loop over frames; vectorised over positions
        # counts[j] = |S(start, start + 1 + j)|: positions static on every transition so far.
        counts = torch.cumprod(above[start:].long(), dim=0).sum(dim=1)
        benefit[start, start + 1:] = counts * lengths[: counts.numel()]
    return benefit.tolist()


def select_static_windows(above: torch.Tensor, max_window: int) -> tuple[list[tuple[int, int]], int]:
    """HoliTom's DP over static windows (official ``select_static_windows``).

    Args:
        above: BoolTensor [T-1, P] (CPU), ``phi > tau``.
        max_window: longest window (frames).
    Returns:
        (windows ``[(s, e), ...]`` covering ``0..T-1`` in order, ``reduced = dp[T-1]``).
    """
    num_frames = above.shape[0] + 1
    benefit = static_window_benefits(above)
    dp = [0] * num_frames
    prev = [0] * num_frames
    for i in range(num_frames):
        best, best_start = (dp[i - 1] if i > 0 else 0), i
        for size in range(2, min(i + 1, max_window) + 1):
            j = i - size
            value = (dp[j] if j >= 0 else 0) + benefit[j + 1][i]
            if value > best:  # strict: ties keep the single frame / the smaller window
                best, best_start = value, j + 1
        dp[i], prev[i] = best, best_start
    windows = []
    i = num_frames - 1
    while i >= 0:
        windows.append((prev[i], i))
        i = prev[i] - 1
    return windows[::-1], dp[-1]
