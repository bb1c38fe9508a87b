"""Integer per-frame budgets from a temporal density ``p`` [T].

Two allocators, both vectorised over frames (no Python loop over frames or tokens):

* :func:`allocate_paper` -- the paper's rule done exactly: every frame gets ``k_min``, the rest
  ``R = B - T * k_min`` is apportioned in proportion to ``p`` under a per-frame capacity
  ``P - k_min`` (frames over capacity are filled and the remainder re-apportioned among the
  others), then a true largest-remainder rounding (remainders equal to 9 decimals are ties,
  which go to the lower frame). ``sum(b) == B``.
* :func:`allocate_official` -- the released V-CAST allocator, bit for bit, including its
  leftover loop that hands every leftover token to the frame with the largest fractional part
  until that frame is full (:func:`trim_official_excess` is its over-budget branch).
"""

from __future__ import annotations

import torch

REMAINDER_DECIMALS = 9


def _stable_rank_descending(values: torch.Tensor) -> torch.Tensor:
    """LongTensor like ``values`` [T]: position of each entry when sorted descending, ties
    broken towards the lower index."""
    order = torch.sort(values, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device)
    return rank


def capped_proportional_shares(weights: torch.Tensor, total: int, capacity: int) -> torch.Tensor:
    """Real shares ``s`` [T] with ``sum(s) == total``, ``0 <= s_t <= capacity``, ``s_t`` in
    proportion to ``weights`` [T] among the frames below capacity.

    This is the fixed point of "fill the frames whose share exceeds capacity, re-apportion the
    rest, repeat": ``s_t = min(capacity, lam * w_t)`` with the unique ``lam`` that makes the sum
    right. With frames sorted by weight, if the top ``k`` are full then
    ``lam_k = (total - k * capacity) / sum(w[k:])``; the answer is the smallest ``k`` whose
    next frame fits (``lam_k * w[k] <= capacity``). Computed in float64.
    """
    n = weights.numel()
    if total >= n * capacity:
        return torch.full((n,), float(capacity), dtype=torch.float64, device=weights.device)
    # Frames with zero weight (an underflowed softmax) still need a share once all others are full.
    w = weights.to(torch.float64).clamp_min(torch.finfo(torch.float64).tiny)
    w_sorted = torch.sort(w, descending=True, stable=True).values
    tail_sums = torch.flip(torch.cumsum(torch.flip(w_sorted, [0]), 0), [0])
    k = torch.arange(n, device=w.device, dtype=torch.float64)
    lam = (total - k * capacity) / tail_sums
    fits = lam * w_sorted <= capacity
    first_fit = torch.argmax(fits.to(torch.int32)).view(1)  # argmax returns the first maximum
    lam_star = lam.gather(0, first_fit)  # [1]; gather, not lam[i], so no host sync on CUDA
    return torch.clamp(lam_star * w, max=float(capacity))


def allocate_paper(weights: torch.Tensor, total: int, tokens_per_frame: int, k_min: int) -> torch.Tensor:
    """Per-frame budgets b [T] (LongTensor) with ``sum(b) == total`` and ``k_min <= b_t <= P``.

    Args:
        weights: [T] non-negative temporal density ``p``.
        total: ``B``, with ``T * k_min <= B <= T * P``.
        tokens_per_frame: ``P``.
        k_min: tokens every frame keeps at least.
    """
    n = weights.numel()
    rest, capacity = total - n * k_min, tokens_per_frame - k_min
    base = torch.full((n,), k_min, dtype=torch.long, device=weights.device)
    if rest == 0:
        return base
    shares = capped_proportional_shares(weights, rest, capacity)
    floors = shares.floor()
    leftover = rest - floors.sum()  # stays a tensor: no host sync
    # Remainders equal to REMAINDER_DECIMALS decimals are ties (-> lower frame): float64 noise
    # must not decide between shares such as 10/3 and 1/3.
    remainder = torch.round((shares - floors) * 10**REMAINDER_DECIMALS)
    remainder = torch.where(floors >= capacity, torch.full_like(shares, -1.0), remainder)
    extra = (_stable_rank_descending(remainder) < leftover).long()
    return base + floors.long() + extra


def allocate_official(weights: torch.Tensor, total: int, tokens_per_frame: int, k_min: int) -> torch.Tensor:
    """The released code's allocator (``_allocate_budget_per_frame``), reproduced exactly.

    ``b_t = k_min + min(floor(p_t * R), P - k_min)`` in float32, then the leftover is poured
    frame by frame in order of decreasing fractional part (first index on ties), each frame
    filled up to ``P`` before the next gets anything -- which is what the released loop does,
    because it retires a frame's fractional part only once the frame is full.

    Args:
        weights: [T] temporal density ``p`` (float32 in the released code).
        total: ``B`` from :func:`vcast.budget.official_total_budget`.
        tokens_per_frame: ``P``.
        k_min: minimum tokens per frame.
    Returns:
        LongTensor [T].
    """
    n = weights.numel()
    rest = total - n * k_min
    raw = official_weights(weights) * rest
    floors = torch.floor(raw)
    budgets = k_min + torch.clamp(floors.long(), max=tokens_per_frame - k_min)
    frac = torch.where(budgets >= tokens_per_frame, torch.full_like(raw, -1.0), raw - floors)
    order = torch.sort(frac, descending=True, stable=True).indices
    room = (tokens_per_frame - budgets)[order]
    leftover = total - budgets.sum()
    poured_before = torch.cumsum(room, 0) - room
    gift_sorted = torch.clamp(leftover - poured_before, min=0)
    gift_sorted = torch.minimum(gift_sorted, room)
    gift = torch.empty_like(gift_sorted)
    gift[order] = gift_sorted
    return budgets + gift


def official_weights(weights: torch.Tensor) -> torch.Tensor:
    """The released allocator's weights [T]: float32, clamped at 0, divided by their sum
    (clamped at 1e-6); all-zero weights count as equal (no-ops for a density that sums to 1)."""
    p = weights.to(torch.float32).clamp_min(0)
    p = torch.where(p.sum() > 0, p, torch.ones_like(p))  # a tensor condition: no host sync
    return p / p.sum().clamp_min(1e-6)


def trim_official_excess(budgets: torch.Tensor, weights: torch.Tensor, total: int, k_min: int) -> torch.Tensor:
    """The released allocator's over-budget branch, for budgets [T] from :func:`allocate_official`.

    If float32 rounding ever made ``sum(floor(p_t R)) > R``, the release takes one token back from
    each frame above ``k_min``, in the order of ``argsort(p)`` (ascending, the kernel's order on
    ties), until the sum is ``total``. A softmax density never reaches it in practice; this only
    keeps the sum right if it does. Returns ``budgets`` itself when nothing is over (a host sync).
    """
    excess = int(budgets.sum()) - total
    if excess <= 0:
        return budgets
    budgets = budgets.clone()
    for frame in torch.argsort(official_weights(weights), descending=False).tolist():
        if excess <= 0:
            break
        if budgets[frame] > k_min:
            budgets[frame] -= 1
            excess -= 1
    return budgets
