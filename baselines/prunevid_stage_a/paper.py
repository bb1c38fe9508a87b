"""PruneVid stage A ``variant="paper"``: the static/dynamic merge in float32 with an exact budget
``floor(r * T * P)`` apportioned over the groups (see :mod:`baselines.prunevid_stage_a`)."""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import torch

from baselines.common.dpc_knn import assign_to_centres, cluster_means, density_peak_centres
from baselines.common.selection_output import selection_from_positions
from baselines.prunevid_stage_a.temporal_segments import refine_labels, run_lengths
from vcast.budget import paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.selection import Selection

logger = logging.getLogger(__name__)


def temporal_windows(frame_means: torch.Tensor, num_clusters: int, k: int) -> list[int]:
    """Window lengths (summing to T) from the frame means [T, D]: DPC-kNN into ``num_clusters``
    (clamped to [1, T]) clusters, then :func:`refine_labels` and :func:`run_lengths`."""
    num_frames = frame_means.shape[0]
    count = max(1, min(int(num_clusters), num_frames))
    centres = density_peak_centres(frame_means, count, k)
    labels = assign_to_centres(frame_means, centres).tolist()
    return run_lengths(refine_labels(labels))


def static_locations(window: torch.Tensor, tau: float) -> torch.Tensor:
    """BoolTensor [P]: locations whose mean pairwise cosine over the window's W frames
    ``window`` [W, P, D] (float32) exceeds ``tau``. W = 1: none.

    The sum over ordered pairs w != t of cos is ``|sum_w n_w|^2 - W`` with ``n_w`` the unit
    tokens, which is the official "sum over all pairs, minus 1 per frame" without a [W, W, P] map.
    """
    frames_in_window = window.shape[0]
    if frames_in_window < 2:
        return torch.zeros(window.shape[1], dtype=torch.bool, device=window.device)
    unit_sum = torch.nn.functional.normalize(window, dim=-1).sum(dim=0)  # [P, D]
    similarity = ((unit_sum * unit_sum).sum(dim=-1) - frames_in_window) / (
        frames_in_window * (frames_in_window - 1)
    )
    return similarity > tau


def proportional_quotas(sizes: list[int], total: int) -> list[int]:
    """Exact largest-remainder apportionment of ``total`` (< sum(sizes)) in proportion to ``sizes``.

    ``q_g = floor(total * s_g / S)`` plus one for the groups with the largest remainders
    ``total * s_g mod S`` (integers, so exact), ties to the earlier group. Each ``q_g <= s_g``
    (``total < S``) and a group of size 0 gets 0.
    """
    whole = sum(sizes)
    floors = [total * size // whole for size in sizes]
    remainders = [total * size % whole for size in sizes]
    leftover = total - sum(floors)
    # Python's sort is stable: equal remainders keep the group order (earlier group first).
    order = sorted(range(len(sizes)), key=lambda g: -remainders[g])
    for g in order[:leftover]:
        floors[g] += 1
    return floors


def group_quotas(sizes: list[int], budget: int, min_cluster_tokens: int) -> list[int]:
    """Tokens each group keeps: ``sizes`` when they fit in ``budget``; else groups of at most
    ``min_cluster_tokens`` stay whole and the rest of ``budget`` goes to the larger groups in
    proportion to size; if the small groups alone exceed ``budget``, all groups share it in
    proportion to size. The quotas sum to ``min(budget, sum(sizes))``."""
    if sum(sizes) <= budget:
        return list(sizes)
    small = [size if size <= min_cluster_tokens else 0 for size in sizes]
    protected = sum(small)
    if protected > budget:
        logger.debug("prunevid_stage_a: %d tokens in groups of <= %d exceed the budget %d; "
                     "apportioning over all groups", protected, min_cluster_tokens, budget)
        return proportional_quotas(sizes, budget)
    large = [size - kept for size, kept in zip(sizes, small)]
    rest = proportional_quotas(large, budget - protected)
    return [kept + extra for kept, extra in zip(small, rest)]


def cluster_group(tokens: torch.Tensor, positions: torch.Tensor, quota: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """DPC-kNN ``tokens`` [n, D] into ``quota`` clusters: (means [quota, D], centre positions [quota])."""
    centres = density_peak_centres(tokens, quota, k)
    labels = assign_to_centres(tokens, centres)
    return cluster_means(tokens, labels, quota), positions.index_select(0, centres)


def paper_select(frames: torch.Tensor, ratio: float, *, tau: float, temporal_segment_ratio: float,
                 dpc_k: int, min_cluster_tokens: int) -> Selection:
    """PruneVid stage A on ``frames`` [T, P, D] (float32): temporal windows, static/dynamic split,
    and DPC-kNN merging to exactly ``floor(ratio * T * P)`` tokens (fewer when static averaging
    alone leaves fewer). Returns a Selection with merged ``tokens`` [K, D] float32."""
    num_frames, tokens_per_frame, _ = frames.shape
    x = frames.float()
    num_clusters = max(1, math.floor(Fraction(repr(temporal_segment_ratio)) * num_frames))
    windows = temporal_windows(frame_stats(x).means, num_clusters, dpc_k)

    locations = torch.arange(tokens_per_frame, device=x.device)
    groups: list[tuple[torch.Tensor, torch.Tensor]] = []  # (tokens [n, D], flat positions [n])
    start = 0
    for length in windows:
        window = x[start : start + length]  # [W, P, D]
        static = static_locations(window, tau)
        static_at, dynamic_at = locations[static], locations[~static]
        # Static tokens: the window mean, placed in the window's first frame.
        groups.append((window[:, static_at].mean(dim=0), start * tokens_per_frame + static_at))
        for offset in range(length):
            frame = start + offset
            groups.append((window[offset, dynamic_at], frame * tokens_per_frame + dynamic_at))
        start += length

    sizes = [int(positions.numel()) for _, positions in groups]
    budget = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)
    quotas = group_quotas(sizes, budget, min_cluster_tokens)
    logger.debug("prunevid_stage_a: windows %s, %d tokens after static averaging, budget %d",
                 windows, sum(sizes), budget)

    out_tokens, out_positions = [], []
    for (tokens, positions), size, quota in zip(groups, sizes, quotas):
        if quota == 0:
            continue
        if quota < size:
            tokens, positions = cluster_group(tokens, positions, quota, dpc_k)
        out_tokens.append(tokens)
        out_positions.append(positions)
    if not out_positions:  # B = 0 (r * T * P < 1): nothing is kept
        out_positions = [torch.zeros(0, dtype=torch.long, device=x.device)]
        out_tokens = [x.new_zeros(0, x.shape[-1])]
    return selection_from_positions(torch.cat(out_positions), num_frames, tokens_per_frame,
                                    tokens=torch.cat(out_tokens))
