"""HoliTom ``variant="paper"``: our clean reading of the outer-LLM merge, in float32 with an exact
budget ``floor(r T P)``.

Algorithm on ``frames`` [T, P, D] (all in float32), ``N = T * P``:

1. ``phi`` [T-1, P]: cosine of the same position in adjacent frames.
2. Static windows by dynamic programming: for a window ``[s, e]`` let ``S(s, e)`` be the
   positions with ``phi[k, i] > tau`` for every ``s <= k < e``; its benefit is
   ``|S(s, e)| * (e - s)`` (the removable copies).
   ``dp[i] = max(dp[i-1], max_{w=2..min(i+1, max_window)} dp[i-w] + benefit(i-w+1, i))``
   with strict ``>`` (ties keep the single frame, then the smaller window); backtracking gives
   the windows and ``reduced = dp[T-1]`` (:mod:`baselines.holitom.static_windows`).
3. ``r' = min(r / ((N - reduced) / N), 1)``.
4. Per window: the static positions ``S(s, e)`` (none for a single frame) are averaged over the
   window's frames (one static set of ``n_s`` tokens); the other positions are dynamic, per frame.
5. Static set: DPC-kNN (:mod:`baselines.common.dpc_knn`, ``k = min(dpc_k, clusters)``) picks the
   centres; every other static token joins its nearest centre (Euclidean); merged token
   ``beta * centre + (1 - beta) * mean(members)``, the centre NOT in the mean (official
   ``merge_tokens_by_clustering``); a centre without members stays itself.
6. Dynamic set of a frame with budget ``c`` (``dominant_fraction`` is the official ``D``):
   ``dominant = round(c * (1 - dominant_fraction))``
   tokens with the highest ``vision_attention`` are kept unchanged; the other ``c - dominant``
   are DPC-kNN clusters of the non-dominant tokens, merged as in 5. With the official
   ``dominant_fraction = 0`` this is pure attention top-k.

Budget: exactly ``B = floor(r * T * P)`` outputs (:func:`vcast.budget.paper_total_budget`).
The official code keeps ``round(n_s * r')`` clusters per static set and ``ceil(n * r')`` tokens
per dynamic set, which only approximates ``r * N`` (rounding per group, ``ceil`` on every frame).
Here those official counts are the weights of an exact largest-remainder apportionment of ``B``
over the groups (static set of each window, dynamic set of each frame, in video order), each
capped by its group size; ties go to the earlier group. Groups whose official count is 0 get
tokens only once every other group is full. When ``r'`` saturates (``B > N - reduced``, e.g.
all frames identical) the groups hold fewer than ``B`` tokens; the official code then keeps only
``N - reduced``. Here the deficit is filled with the removed copies (static positions in the
non-first frames of each window) of highest ``vision_attention``, kept unchanged at their own
positions (ties to the lower flat index). So ``r = 1`` keeps every position, but the first frame
of a window still holds the window averages of its static positions (as the official ``r' = 1``).

Positions: a dynamic token (and a dynamic contextual cluster) keeps its own / its centre's
position in its frame; a static merged token takes its cluster centre's spatial location in the
window's FIRST frame (as HoliTom places static tokens on LLaVA-Video). Static and dynamic
locations of a window are disjoint and deficit copies lie in non-first frames, so no two outputs
share a position. Tokens are returned in float32 ([K, D]).

Deliberate deviations of ``"paper"`` from the official code:

* exact budget ``floor(r T P)`` apportioned over groups (above) instead of per-group
  ``round`` / ``ceil``, and the deficit fill when ``r'`` saturates;
* DPC-kNN without the ``rand * 1e-6`` density noise: density ties go to the lower index
  (:mod:`baselines.common.dpc_knn`); attention top-k ties go to the lower index;
* everything is computed in float32 (the official code runs the merge in the model dtype);
* the DP is computed on integer benefits (the official float32 values are the same integers);
* outputs are ordered by position, not [static..., dynamic...] per window, and no newline
  tokens are added (the model adapter lays out the sequence).
"""

from __future__ import annotations

import logging
import math

import torch

from baselines.common.dpc_knn import assign_to_centres, density_peak_centres, top_indices
from baselines.common.selection_output import selection_from_positions
from baselines.holitom.static_windows import select_static_windows
from vcast.budget import paper_total_budget
from vcast.selection import Selection

logger = logging.getLogger(__name__)

REMAINDER_DECIMALS = 9


def _largest_remainder(total: int, weights: torch.Tensor, caps: torch.Tensor) -> torch.Tensor:
    """Integer shares [G] (LongTensor) with ``sum == total``, ``0 <= share_g <= caps_g``, in
    proportion to ``weights`` among groups below their cap; only groups with ``weights > 0`` and
    ``caps > 0`` take part. Requires ``total <= caps[active].sum()``.

    Real shares ``min(cap_g, lam * w_g)``: groups fill up in order of ``cap_g / w_g``; if the
    first ``k`` of that order are full, ``lam_k = (total - their caps) / (remaining weight)``,
    and the answer is the smallest ``k`` whose next group fits. Then largest remainder
    (remainders equal to 9 decimals are ties, which go to the lower group). Float64, CPU.
    """
    out = torch.zeros(weights.numel(), dtype=torch.long)
    active = (weights > 0) & (caps > 0)
    if total <= 0 or not bool(active.any()):
        return out
    w = weights[active].to(torch.float64)
    c = caps[active].to(torch.float64)
    if total >= float(c.sum()):
        out[active] = caps[active]
        return out
    order = torch.sort(c / w, stable=True).indices
    w_sorted, c_sorted = w[order], c[order]
    full_before = torch.cumsum(c_sorted, 0) - c_sorted
    tail = torch.flip(torch.cumsum(torch.flip(w_sorted, [0]), 0), [0])
    lam = (total - full_before) / tail
    fits = lam * w_sorted <= c_sorted * (1 + 1e-12)
    fits[-1] = True
    lam_star = lam[int(torch.argmax(fits.to(torch.int8)))]
    shares = torch.clamp(lam_star * w, max=c)
    floors = torch.minimum(torch.floor(shares + 1e-9), c)  # snap float noise such as 2.9999999999
    leftover = total - int(floors.sum())
    remainder = torch.round((shares - floors).clamp_min(0) * 10**REMAINDER_DECIMALS)
    remainder = torch.where(floors >= c, torch.full_like(remainder, -1.0), remainder)
    rank = torch.empty(remainder.numel(), dtype=torch.long)
    rank[torch.sort(remainder, descending=True, stable=True).indices] = torch.arange(remainder.numel())
    out[active] = floors.long() + (rank < leftover).long()
    return out


def apportion_groups(total: int, weights: list[float], caps: list[int]) -> tuple[list[int], int]:
    """Split ``total`` over groups: first over those with weight > 0 (in proportion to weight),
    then, once they are all full, over the zero-weight ones (in proportion to size).

    Returns:
        (counts per group, deficit = what did not fit in any group).
    """
    w = torch.tensor(weights, dtype=torch.float64)
    c = torch.tensor(caps, dtype=torch.long)
    positive = w > 0
    first = min(total, int(c[positive].sum()))
    counts = _largest_remainder(first, torch.where(positive, w, torch.zeros_like(w)), c)
    rest = total - first
    zero = (~positive) & (c > 0)
    second = min(rest, int(c[zero].sum()))
    counts += _largest_remainder(second, torch.where(zero, c.to(torch.float64), torch.zeros_like(w)), c)
    return counts.tolist(), rest - second


def _merge_clusters(tokens: torch.Tensor, count: int, dpc_k: int, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """DPC-kNN merge of ``tokens`` [n, D] float32 into ``count`` tokens.

    Returns:
        (centre indices [count] ascending LongTensor, merged tokens [count, D] float32) with
        merged = ``beta * centre + (1 - beta) * mean(other members)`` (a lone centre stays itself).
    """
    centres = density_peak_centres(tokens, count, min(dpc_k, count))
    labels = assign_to_centres(tokens, centres, "euclidean")
    member = torch.ones(tokens.shape[0], dtype=torch.bool, device=tokens.device)
    member[centres] = False  # the official mean is over the non-centre tokens only
    sums = torch.zeros(count, tokens.shape[1], device=tokens.device).index_add_(0, labels[member], tokens[member])
    sizes = torch.bincount(labels[member], minlength=count).to(tokens.dtype)[:, None]
    anchor = tokens.index_select(0, centres)
    merged = torch.where(sizes > 0, beta * anchor + (1 - beta) * sums / sizes.clamp_min(1), anchor)
    return centres, merged


def paper_select(frames: torch.Tensor, ratio: float, attention: torch.Tensor, *, tau: float, beta: float,
                 dominant_fraction: float, dpc_k: int, max_window: int) -> Selection:
    """The clean reading (module docstring) on one video ``frames`` [T, P, D].

    Args:
        frames: [T, P, D] LLM-space video tokens, any float dtype (computed in float32).
        ratio: retention ratio r in (0, 1].
        attention: [T, P] attention received per token, on ``frames``' device.
        tau: static threshold on the same-position cosine (already resolved per ratio).
        beta, dominant_fraction, dpc_k, max_window: checked by :mod:`baselines.holitom.params`.
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and ``tokens`` [K, D] float32, ``K = floor(r T P)``.
    """
    num_frames, tokens_per_frame, _ = frames.shape
    device = frames.device
    x = frames.float()
    unit = torch.nn.functional.normalize(x, dim=-1)
    phi = (unit[:-1] * unit[1:]).sum(dim=-1)  # [T-1, P] same-position cosine
    above = (phi > tau).cpu()  # the one transfer: every count below is taken on the host
    windows, reduced = select_static_windows(above, max_window)
    total_tokens = num_frames * tokens_per_frame
    rescaled = min(ratio / ((total_tokens - reduced) / total_tokens), 1.0)
    budget = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)

    # Groups in video order: per window its static set (if any), then each frame's dynamic set.
    groups: list[tuple[str, int, int, torch.Tensor]] = []  # (kind, window start, frame, static mask)
    weights: list[float] = []
    caps: list[int] = []
    for start, end in windows:
        static = (above[start:end].all(dim=0) if end > start
                  else torch.zeros(tokens_per_frame, dtype=torch.bool))
        n_static = int(static.sum())
        if n_static:
            groups.append(("static", start, end, static))
            weights.append(float(round(n_static * rescaled)))
            caps.append(n_static)
        n_dynamic = tokens_per_frame - n_static
        for frame in range(start, end + 1):
            groups.append(("dynamic", start, frame, static))
            weights.append(float(math.ceil(n_dynamic * rescaled)))
            caps.append(n_dynamic)
    counts, deficit = apportion_groups(budget, weights, caps)
    logger.debug("holitom: tau=%.3f windows=%s reduced=%d r'=%.4f official=%d B=%d deficit=%d", tau,
                 windows, reduced, rescaled, int(sum(weights)), budget, deficit)

    positions: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    for (kind, start, frame, static), count in zip(groups, counts):  # loop over groups, not tokens
        if count == 0:
            continue
        if kind == "static":
            local = torch.nonzero(static).squeeze(1).to(device)
            tokens = x[start:frame + 1, local].mean(dim=0)  # [n_s, D] window average
            centres, merged = _merge_clusters(tokens, count, dpc_k, beta)
            positions.append(start * tokens_per_frame + local[centres])  # the window's first frame
            outputs.append(merged)
            continue
        local = torch.nonzero(~static).squeeze(1).to(device)
        tokens, scores = x[frame, local], attention[frame, local]
        dominant = round(count * (1 - dominant_fraction))
        kept = top_indices(scores, dominant)
        positions.append(frame * tokens_per_frame + local[kept])
        outputs.append(tokens[kept])
        if count > dominant:
            rest = torch.ones(local.numel(), dtype=torch.bool, device=device)
            rest[kept] = False
            rest_idx = torch.nonzero(rest).squeeze(1)
            centres, merged = _merge_clusters(tokens[rest_idx], count - dominant, dpc_k, beta)
            positions.append(frame * tokens_per_frame + local[rest_idx[centres]])
            outputs.append(merged)

    if deficit > 0:
        # r' saturated: refill with the removed copies (static positions of non-first frames).
        copies = torch.zeros(num_frames, tokens_per_frame, dtype=torch.bool)
        for start, end in windows:
            if end > start:
                copies[start + 1:end + 1] = above[start:end].all(dim=0)
        flat = torch.nonzero(copies.reshape(-1)).squeeze(1).to(device)
        chosen = flat[top_indices(attention.reshape(-1)[flat], deficit)]
        positions.append(chosen)
        outputs.append(x.reshape(-1, x.shape[-1])[chosen])

    dim = x.shape[-1]
    keep = torch.cat(positions) if positions else torch.zeros(0, dtype=torch.long, device=device)
    merged_tokens = torch.cat(outputs) if outputs else torch.zeros(0, dim, device=device)
    return selection_from_positions(keep, num_frames, tokens_per_frame, tokens=merged_tokens)
