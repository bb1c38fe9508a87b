"""VisionZip ``variant="paper"``: HoliTom's per-frame algorithm in float32 with an exact total
budget, deterministic ties and epsilon-normalised keys.

Per frame ``t`` with budget ``b_t``:

* ``dominant = int(b_t * dominant_ratio)`` (HoliTom's ``int(SPATIAL_TOKENS * DOMINANT_RATIO)``,
  default ratio 54/64) tokens with the highest ``vision_attention`` are kept as they are;
* ``c = b_t - dominant`` contextual tokens: the remaining ``N_rem = P - dominant`` tokens (in
  index order) get targets at ``step = max(1, N_rem // c)``, the first ``c`` of
  ``arange(0, N_rem, step)``; every other remaining token goes to its most cosine-similar target
  on ``vision_keys``; contextual token = ``target + mean(assigned)`` -- a SUM, as the official
  code computes it (``merge="sum"``); a target with nothing assigned stays itself.
  ``merge="mean"`` averages the target with its assigned tokens instead (not official).

Every frame outputs exactly ``b_t`` tokens: since ``b_t <= P`` we have ``N_rem >= c``, and
``step <= N_rem / c`` makes ``arange(0, N_rem, step)`` at least ``c`` long, so there are always
``c`` distinct targets (no padding case). ``b_t = 1`` gives ``dominant = 0`` and one contextual
token (the frame's first token plus the mean of all others), as the official arithmetic does.

Budgets: ``B = floor(r * T * P)`` exactly (:func:`vcast.budget.paper_total_budget`), split over
frames by :func:`vcast.allocation.allocate_paper` with ``k_min = 1`` when ``B >= T`` (else 0,
so some frames keep nothing):

* ``temporal="uniform"`` (default): equal weights, i.e. ``floor(B / T)`` or one more (the
  extra tokens go to the earliest frames);
* ``temporal="curvature"``: V-CAST's curvature density (softmax of the curvature of the unit
  frame means at temperature ``tau``), the "+V-CAST budgeting" variant. For ``B >= T`` it gives
  V-CAST's own budgets; for ``B < T`` V-CAST raises B to T, this method does not.

Output: merging. Dominant tokens keep their own position; a contextual token takes its
target's position. Tokens are returned in float32 ([K, D]).

Deliberate deviations of ``paper`` from the official code (HoliTom's adaptation):

* exact total budget ``floor(r T P)`` apportioned over frames, instead of a fixed
  ``SPATIAL_TOKENS`` per frame;
* ties in the attention ranking go to the lower token index (the official ``topk`` leaves them
  to the kernel); argmax ties in the target assignment go to the earlier target;
* everything is computed in float32 (the official code runs in the model dtype);
* keys are L2-normalised with an epsilon (the official code divides by the bare norm, so a
  zero key gives NaN);
* no CLS token exists to keep (the image version always keeps CLS);
* outputs are ordered by position (HoliTom's LLaVA-OV layout is [dominant..., contextual...]);
* ``temporal="curvature"`` and ``merge="mean"`` are not in the official code.
"""

from __future__ import annotations

import logging
from typing import Optional

import torch

from baselines.common.selection_output import selection_from_positions
from vcast.allocation import allocate_paper
from vcast.budget import paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.selection import Selection
from vcast.temporal import temporal_weights

logger = logging.getLogger(__name__)

KEY_EPS = 1e-12


def _compress_group(tokens: torch.Tensor, attention: torch.Tensor, keys: torch.Tensor,
                    budget: int, dominant_ratio: float, merge: str) -> tuple[torch.Tensor, torch.Tensor]:
    """VisionZip on G frames that share one budget ``b``.

    Args:
        tokens: [G, P, D] float32 LLM-space tokens.
        attention: [G, P] float32 attention received by each token.
        keys: [G, P, d] float32 merge metric.
        budget: ``b`` (1 <= b <= P).
    Returns:
        (local positions [G, b] LongTensor, output tokens [G, b, D] float32): dominant first,
        then contextual.
    """
    groups, tokens_per_frame, dim = tokens.shape
    dominant = int(budget * dominant_ratio)
    contextual = budget - dominant
    # Stable descending sort: equal attention -> lower index first.
    order = torch.sort(attention, dim=1, descending=True, stable=True).indices
    dominant_idx = order[:, :dominant]  # [G, dominant]
    if contextual == 0:
        return dominant_idx, torch.gather(tokens, 1, dominant_idx[..., None].expand(-1, -1, dim))

    is_dominant = torch.zeros(groups, tokens_per_frame, dtype=torch.bool, device=tokens.device)
    is_dominant.scatter_(1, dominant_idx, True)
    remaining = tokens_per_frame - dominant
    # Stable sort of the 0/1 mask lists the non-dominant tokens first, in index order.
    rest_idx = torch.sort(is_dominant.to(torch.int8), dim=1, stable=True).indices[:, :remaining]

    step = max(1, remaining // contextual)
    target_local = torch.arange(0, remaining, step, device=tokens.device)[:contextual]
    is_target = torch.zeros(remaining, dtype=torch.bool, device=tokens.device)
    is_target[target_local] = True
    target_idx = rest_idx[:, target_local]  # [G, c]
    other_idx = rest_idx[:, ~is_target]  # [G, N_rem - c]

    def take(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, idx[..., None].expand(-1, -1, x.shape[-1]))

    unit_keys = torch.nn.functional.normalize(keys, dim=-1, eps=KEY_EPS)
    similarity = torch.bmm(take(unit_keys, other_idx), take(unit_keys, target_idx).transpose(1, 2))  # [G, N_o, c]
    labels = torch.argmax(similarity, dim=2)  # first maximum: ties to the earlier target
    # One-hot bmm (as the official code does) rather than scatter_add: deterministic on CUDA.
    assign = torch.nn.functional.one_hot(labels, contextual).to(tokens.dtype)  # [G, N_o, c]
    sums = torch.bmm(assign.transpose(1, 2), take(tokens, other_idx))  # [G, c, D]
    counts = assign.sum(dim=1)[..., None]  # [G, c, 1]
    targets = take(tokens, target_idx)
    if merge == "sum":
        merged = targets + sums / counts.clamp_min(1)  # official: target + mean(assigned)
    else:
        merged = (targets + sums) / (counts + 1)
    positions = torch.cat([dominant_idx, target_idx], dim=1)
    return positions, torch.cat([take(tokens, dominant_idx), merged], dim=1)


def paper_select(frames: torch.Tensor, ratio: float, attention: torch.Tensor, vision_keys: Optional[torch.Tensor],
                 *, dominant_ratio: float, temporal: str, tau: float, merge: str) -> Selection:
    """The per-frame algorithm (module docstring) on ``frames`` [T, P, D], in float32.

    Args:
        frames: [T, P, D] LLM-space video tokens, any float dtype.
        ratio: retention ratio r in (0, 1].
        attention: [T, P] attention received per token (checked, on ``frames``' device).
        vision_keys: [T, P, d] merge metric (checked); None: ``frames``.
        dominant_ratio, temporal, tau, merge: checked by :mod:`baselines.visionzip.method`.
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T], ``tokens`` [K, D] float32 (``K = floor(r T P)``)
        and the temporal density as ``frame_weights`` [T].
    """
    num_frames, tokens_per_frame, _ = frames.shape
    device = frames.device
    total = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)
    k_min = 1 if total >= num_frames else 0
    if temporal == "curvature":
        density = temporal_weights("curvature", frames, frame_stats(frames).means, tau, seed=0)
    else:
        density = torch.full((num_frames,), 1.0 / num_frames, device=device)
    budgets = allocate_paper(density, total, tokens_per_frame, k_min)

    keys_source = frames if vision_keys is None else vision_keys
    positions, outputs = [], []
    budget_list = budgets.tolist()
    # Frames with equal budgets are compressed together (uniform budgets take 1-2 groups, each a
    # run of consecutive frames, which is sliced rather than copied).
    for budget in sorted(set(budget_list) - {0}):
        members = [t for t, b in enumerate(budget_list) if b == budget]
        if members[-1] - members[0] + 1 == len(members):
            pick = slice(members[0], members[-1] + 1)
            group_frames, group_attention, group_keys = frames[pick], attention[pick], keys_source[pick]
        else:
            index = torch.tensor(members, device=device)
            group_frames, group_attention, group_keys = (
                frames.index_select(0, index), attention.index_select(0, index), keys_source.index_select(0, index))
        local, merged = _compress_group(group_frames.float(), group_attention, group_keys.float(),
                                        int(budget), float(dominant_ratio), merge)
        group = torch.tensor(members, device=device)
        positions.append((local + group[:, None] * tokens_per_frame).reshape(-1))
        outputs.append(merged.reshape(-1, merged.shape[-1]))
    logger.debug("visionzip: T=%d P=%d r=%.4g -> B=%d (%s budgets, dominant_ratio=%.4g, merge=%s)",
                 num_frames, tokens_per_frame, ratio, total, temporal, dominant_ratio, merge)
    if not positions:  # B = 0 (r * T * P < 1): nothing is kept
        positions = [torch.zeros(0, dtype=torch.long, device=device)]
        outputs = [torch.zeros(0, frames.shape[-1], dtype=torch.float32, device=device)]
    return selection_from_positions(torch.cat(positions), num_frames, tokens_per_frame,
                                    tokens=torch.cat(outputs), frame_weights=density)
