"""PruneVid, stage A only: the pre-LLM static/dynamic merge (``prunevid_stage_a``).

Paper: "PruneVid: Visual Token Pruning for Efficient Video Large Language Models" (ACL 2025).
Official code: Visual-AI/PruneVid@b12600c, ``models/pllava/modeling_pllava.py``
``merge_frames_dynamic`` L764-827 with ``cluster_dpc_knn``, ``refine_clusters`` and
``segment_lengths``; specified in inllm_methods.md sections 6.1, 6.3 and 6.4. Stage B (the
attention-based pruning inside the LLM, section 6.2) is not part of this compressor.

Algorithm, on the tokens ``frames`` [T, P, D] (all arithmetic in float32):

1. Temporal segmentation. DPC-kNN (``baselines.common.dpc_knn``, k = ``dpc_k``) clusters the T frame
   means into ``max(1, floor(T * temporal_segment_ratio))`` clusters; ``refine_labels`` makes the
   labels contiguous in time as the official ``refine_clusters`` does (per label keep its longest
   run(s); a label whose longest run has length 1 is dissolved; each dissolved (-1) run, left to
   right, joins the neighbour whose adjacent run is longer, the left one on ties, label 0 if it
   has none); the windows are the runs of equal labels.
2. Per window of W frames, location p is static when the mean pairwise cosine of its W tokens
   (over ordered pairs of distinct frames) exceeds ``tau``. Static locations give one token each,
   the mean over the window's frames; each frame keeps its own dynamic (non-static) locations.
3. Groups: each window's static set and each frame's dynamic set. A group larger than its quota
   (below) is clustered with DPC-kNN into ``quota`` clusters, each output being the plain mean of
   its members; other groups are kept whole.

Default hyper-parameters (official ``scripts/eval.sh``, the same for every retention ratio):
``tau = 0.8``, ``temporal_segment_ratio = 0.25``, ``dpc_k = 7``, ``min_cluster_tokens = 14``.
The retention ratio sets the budget (below). Model inputs: none.

Positions of the merged tokens (each output takes its representative's on-grid place):
a static token, or a static cluster, takes its (centre's) spatial location in the window's
FIRST frame; a dynamic cluster takes its centre's own (frame, location); an unclustered dynamic
token keeps its own. Static and dynamic locations of a window are disjoint, so no two outputs
share a position.

Variants (``variant=``):

``"paper"`` (default): everything in this docstring; float32 arithmetic, an exact budget.

``"official"``: Visual-AI/PruneVid@b12600c ``merge_frames_dynamic`` bit for bit on CPU, in the
input dtype where the release computes in it (frame means, unit tokens, the cosine einsum and its
sums, the static means, the one-hot ``bmm`` cluster means) and float32 where it upcasts (DPC-kNN):
:mod:`baselines.prunevid_stage_a_official`. The retention ratio is the release's
``cluster_ratio`` (``int(n * ratio)`` clusters per group of more than ``min_cluster_tokens``
tokens): the count is data-dependent, as in the release. ``int(T * temporal_segment_ratio)``
temporal clusters (float product, truncated). Density noise ``U(0, 1) * 1e-6`` from
``torch.Generator().manual_seed(seed)`` (``seed=0``) in the release's draw order. Outputs in the
release's order (per window: the static group, then each frame's dynamic group; clusters in
``topk`` order) at slots that keep that order and encode the groups for ``prunevid``'s official
stage B (static outputs of a window at patches ``0..s-1`` of its first frame, a frame's dynamic
ones at ``P-d..P-1``): with LLaVA-OneVision's compacted positions the LLM sees the release's
sequence. The ``W = 1`` quirk is kept (``x / 0``: a self-cosine that rounds above 1 gives
``+inf``, a static location). Other defaults as ``paper``'s. Measured against the release's
functions loaded at run time from the extracted file (T 7-32, P 16-196, D 8-64, cluster_ratio
0.25-0.7, temporal_segment_ratio 0.25-0.5, tau 0-0.95; random, near-static, scene-cut, repeated
(tied) and half-static videos): merged tokens and their order fp32 120/120 and bf16 120/120
exact (and 5/5 per dtype at LLaVA-OneVision's size, T 32, P 196, D 128), ``refine_clusters``
2000/2000 label sequences
(a comparison outside the project, docs/fidelity.md). Not reproduced: inputs
the release cannot run (fewer than ``dpc_k`` or ``1 / temporal_segment_ratio`` frames: its
``topk`` raises; here ``k`` is clamped and there is at least one temporal cluster; a group whose
``int(n * ratio)`` is 0 is dropped here, the release raises).

Deliberate deviations of ``variant="paper"`` from the official code:

* Budget. The official count is data-dependent: every group of more than 14 tokens is clustered
  into ``floor(n * cluster_ratio)`` clusters (cluster_ratio = 0.5). Here the retention ratio r
  replaces cluster_ratio: the method outputs exactly ``B = floor(r * T * P)`` tokens. B is
  apportioned over the groups in proportion to their sizes with exact integer largest-remainder
  rounding (ties to the earlier group; groups ordered window by window, static set first, then
  the frames' dynamic sets), every group capped at its size.
* Threshold rule (``min_cluster_tokens``, the official 14). Groups of at most this many tokens are
  never clustered, as in the official code: they are kept whole and the rest of B is apportioned
  over the larger groups. Only when those small groups alone hold more than B tokens (very low r)
  is B apportioned over all groups in proportion to size, small groups included, so that the count
  stays exactly B.
* When the static averaging alone leaves no more than B tokens, all of them are kept and the
  count is that number, which is less than B (a fully static video at r = 1, for instance).
* A group whose quota is 0 is dropped (it gets no output).
* DPC-kNN is the deterministic shared one (no 1e-6 density noise; ties to the lower index); k
  is clamped to the number of points, so T < 7 works (the official top-k needs T >= 7), and the
  temporal cluster count is at least 1 (T = 1 gives one window).
* A window of one frame has no static location (the official 0/0 is NaN, and NaN > tau is False).
* The temporal cluster count ``floor(T * temporal_segment_ratio)`` is taken on the decimal value
  of the ratio as written (``vcast.budget`` does the same for B), not on its binary float.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import torch

from baselines.common.dpc_knn import assign_to_centres, cluster_means, density_peak_centres
from baselines.common.selection_output import selection_from_positions
from vcast.budget import paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int, check_positive, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)


def refine_labels(labels: list[int]) -> list[int]:
    """Make temporal cluster labels contiguous, as the official ``refine_clusters`` does.

    Per label, its longest run(s) are kept and its other runs become -1; a label whose longest
    run has length 1 becomes -1 everywhere. Then, left to right, each run of -1 takes the label
    of the neighbour whose adjacent run is longer (measured on the labels as already refined,
    so an earlier filled run counts), the left one on ties, label 0 if it has no neighbour.
    Loops over frames (T is small).
    """
    n = len(labels)
    runs: dict[int, list[tuple[int, int]]] = {}
    start = 0
    for i in range(1, n + 1):
        if i == n or labels[i] != labels[start]:
            runs.setdefault(labels[start], []).append((start, i))
            start = i
    refined = list(labels)
    for label_runs in runs.values():
        longest = max(end - begin for begin, end in label_runs)
        for begin, end in label_runs:
            if longest == 1 or end - begin < longest:
                refined[begin:end] = [-1] * (end - begin)
    i = 0
    while i < n:
        if refined[i] != -1:
            i += 1
            continue
        begin = i
        while i < n and refined[i] == -1:
            i += 1
        left = right = None
        left_length = right_length = 0
        if begin > 0:
            left = refined[begin - 1]
            j = begin - 1
            while j >= 0 and refined[j] == left:
                j -= 1
            left_length = begin - 1 - j
        if i < n:
            right = refined[i]
            j = i
            while j < n and refined[j] == right:
                j += 1
            right_length = j - i
        if right_length > left_length:
            new = right
        else:
            new = left if left is not None else right
        refined[begin:i] = [0 if new is None else new] * (i - begin)
    return refined


def run_lengths(labels: list[int]) -> list[int]:
    """Lengths of the runs of equal labels, in order (the official ``segment_lengths``)."""
    lengths: list[int] = []
    for i, label in enumerate(labels):
        if i > 0 and label == labels[i - 1]:
            lengths[-1] += 1
        else:
            lengths.append(1)
    return lengths


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


def check_stage_a_params(tau: float, temporal_segment_ratio: float, dpc_k: int,
                         min_cluster_tokens: int) -> tuple[float, float, int, int]:
    """Stage A's parameters, checked (ValueError naming the bad one); shared with ``prunevid``."""
    tau = check_range("tau", tau, -1.0, 1.0)
    temporal_segment_ratio = check_positive("temporal_segment_ratio", temporal_segment_ratio)
    if temporal_segment_ratio > 1.0:
        raise ValueError(f"temporal_segment_ratio must be in (0, 1], got {temporal_segment_ratio!r}")
    dpc_k = check_int("dpc_k", dpc_k, 1)
    min_cluster_tokens = check_int("min_cluster_tokens", min_cluster_tokens, 0)
    return tau, temporal_segment_ratio, dpc_k, min_cluster_tokens


VARIANTS = (PAPER, OFFICIAL)


@register_method("prunevid_stage_a", inputs=(), variants=VARIANTS)
def prunevid_stage_a_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    tau: float = 0.8,
    temporal_segment_ratio: float = 0.25,
    dpc_k: int = 7,
    min_cluster_tokens: int = 14,
    variant: str = PAPER,
    seed: int = 0,
) -> Selection:
    """PruneVid stage A on ``frames`` [T, P, D]: temporal windows, static/dynamic split, and
    DPC-kNN merging to exactly ``floor(ratio * T * P)`` tokens (fewer when static averaging
    alone leaves fewer). Returns a Selection with merged ``tokens`` [K, D] float32.
    ``variant="official"``: the release's ``merge_frames_dynamic`` with ``cluster_ratio = ratio``
    (a data-dependent count), tokens in the input dtype
    (:mod:`baselines.prunevid_stage_a_official`).

    Args:
        tau: a location is static in a window when its mean pairwise cosine exceeds ``tau``
            (a number in [-1, 1]).
        temporal_segment_ratio: temporal clusters per frame, in (0, 1].
        dpc_k: nearest neighbours (self included) of the DPC-kNN density, >= 1.
        min_cluster_tokens: groups of at most this many tokens are not clustered, >= 0.
        variant: ``"paper"`` or ``"official"`` (module docstring).
        seed: the density noise of ``variant="official"`` (``torch.Generator().manual_seed(seed)``);
            ``"paper"`` has no noise and ignores it.
    """
    variant = check_variant("prunevid_stage_a", variant, VARIANTS)
    tau, temporal_segment_ratio, dpc_k, min_cluster_tokens = check_stage_a_params(
        tau, temporal_segment_ratio, dpc_k, min_cluster_tokens)
    seed = check_int("seed", seed, 0)
    if variant == OFFICIAL:
        # imported here: the official module uses this one's refine_labels / run_lengths
        from baselines.prunevid_stage_a_official import official_stage_a

        tokens, slots = official_stage_a(frames, ratio, tau=tau, temporal_segment_ratio=temporal_segment_ratio,
                                         dpc_k=dpc_k, min_cluster_tokens=min_cluster_tokens, seed=seed)
        return selection_from_positions(slots, frames.shape[0], frames.shape[1], tokens=tokens)

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
