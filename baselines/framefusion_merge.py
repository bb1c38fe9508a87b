"""FrameFusion's first similarity merge (the one on the LLM's input embeddings, before any layer).

Paper: "FrameFusion: Combining Similarity and Importance for Video Token Reduction on Large
Visual Language Models", ICCV 2025.
Official code: thu-nics/FrameFusion@fbec1d2 ``framefusion/main.py`` L103-138 (the merge branch of
``forward``), L180-319 (``compute_similarity_and_token_index_by_patch``,
``merge_tokens_and_get_mask``); inllm_methods.md section 7.3. Read against the snapshot
275c7e7 of the same file.

Only the merge that runs at layer 0 before attention is implemented. FrameFusion then keeps
merging after each early attention block and finally prunes by the last token's attention
(inllm_methods.md 7.4-7.5); that in-LLM part belongs to the in-LLM integration, not here.

Algorithm on ``frames`` [T, P, D] (N = T * P tokens, cosines in float32):

* ``c[t, i] = cos(x[t, i], x[t-1, i])``, the same patch in the previous frame; frame 0 is never
  merged;
* candidates: ``c >= threshold``;
* cap ``u = 1 - r`` (FrameFusion's ``cost`` is r here; with an empty sparsity list its first merge
  may take at most ``1 - cost`` of the tokens). If ``|cand| >= floor(u * N)``, merge only the
  ``floor(u * N)`` most similar candidates; else merge them all;
* merge rule: along each patch's time axis, a run of consecutive merged tokens collapses into the
  token just before the run (its earliest frame), which becomes the UNWEIGHTED mean of itself and
  the run members and keeps its own position (merged tokens sit at the run's first frame).

Defaults: ``threshold=0.6`` (S_th; the official examples use 0.6 for LLaVA-Video, 0.5 for Qwen2-VL
and InternVL, 0.7 for MiniCPM-V / NVILA; ``apply_framefusion`` defaults to 0.6 and cost=0.3).
No model inputs. Merging: returns the merged tokens (float32).

Budget (FrameFusion defines its own count; it is NOT always ``floor(r * N)``):

* cap branch (enough similar tokens): exactly ``N - floor((1 - r) * N) = ceil(r * N)`` tokens
  remain (``floor(r * N)`` when ``r * N`` is an integer, one more otherwise);
* otherwise every candidate is merged and ``N - |cand|`` tokens remain, data-dependent and above
  ``ceil(r * N)``. In FrameFusion the later merges and the in-LLM pruning step remove the rest;
  that arrives with the in-LLM integration.

Deliberate deviations from the official code:

* Ties in the cap branch go to the lower flat index ``t * P + i`` (stable sort); the official
  ``torch.topk`` leaves ties unspecified and works in patch-major order.
* The branch test is on integers (``|cand| >= floor(u * N)``) and ``floor(u * N)`` is taken on the
  decimal value of r (the official ``a < u`` on floats and ``int(u * N)`` in binary floating
  point); both give the same merges except at binary rounding edges.
* Cosine ``a.b / (|a| |b| + eps)`` (zero vectors give 0 instead of NaN) and the means are computed
  in float32, not in the model dtype in place on the residual stream.
* The token grid is the P tokens of a frame: the LLaVA-Video per-row newline "patches" and the
  LLaVA-OV trailing newline are not video tokens of this harness (inllm_methods.md 7.6).

The deviations above are those of ``variant="paper"`` (the default: float32 whatever the input
dtype, decimal cap, stable ties; unchanged).

``variant="official"``: the release's first ``FrameFusion.forward`` call (thu-nics/FrameFusion@fbec1d2
``framefusion/main.py`` L103-138 with L180-343), bit for bit on CPU in float32 and bf16, through
:mod:`baselines.framefusion_official`: patch-major order, cosines ``sum(a*b) / (|a| |b|)`` in the
input dtype (no epsilon), candidates by ``sim >= S_th`` in that dtype (S_th cast to it), the cap
``u = _compute_pruning_ratio([], r)`` in floats with ``L = num_layers`` (None: the release's
hard-coded 28) and the float branch test ``a < u``, ``torch.topk(sim, int(u N))`` in the capped
branch (the release's tie order), members added one by one in the input dtype and divided by
``k + 1`` in it. ``tokens`` come back in the input dtype. Measured against the release's module
loaded at run time (a comparison outside the project, docs/fidelity.md, part A: T in 1..16, P in 1..24,
random / nearly static / exactly tied / drifting videos, r and S_th varied): float32 160/160,
bf16 160/160 exact kept sets and token values (``paper`` on the same cases: 150/160 and 126/160 kept
sets). Remaining deviation of the official variant: the grid is the harness's (no newline
"patches"); a single video per call (the release merges across every video of its sequence).
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import torch

from baselines.framefusion_official import (
    RELEASE_BUDGET_LAYERS,
    adjacent_similarity,
    merge_choice,
    merge_tokens,
    pruning_ratio,
)
from baselines.common.selection_output import selection_from_positions
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.temporal import cosine
from vcast.validation import check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

VARIANTS = (PAPER, OFFICIAL)


def merge_cap(ratio: float, total: int) -> int:
    """``floor((1 - r) * N)``, the most tokens the first merge may remove (decimal r)."""
    return math.floor((1 - Fraction(repr(float(ratio)))) * total)


def previous_frame_similarity(frames: torch.Tensor) -> torch.Tensor:
    """``c[t, i] = cos(x[t, i], x[t-1, i])`` in float32, ``-inf`` for frame 0: [T, P, D] -> [T, P]."""
    x = frames.float()
    first = torch.full_like(x[:1, :, 0], float("-inf"))
    return torch.cat([first, cosine(x[1:], x[:-1])], dim=0)


@register_method("framefusion_merge", inputs=(), variants=VARIANTS)
def framefusion_merge_select(frames: torch.Tensor, ratio: float, *, threshold: float = 0.6,
                             num_layers: int | None = None, variant: str = PAPER) -> Selection:
    """FrameFusion's first merge on ``frames`` [T, P, D].

    Args:
        frames: float [T, P, D], any dtype and device.
        ratio: r in (0, 1], FrameFusion's cost; the merge removes at most ``floor((1 - r) * N)``
            (``official``: ``int(u * N)`` with the release's float ``u``).
        threshold: S_th, the cosine at or above which a token merges into its predecessor.
        num_layers: ``official`` only: the ``L`` of the release's budget formula that sets the
            cap ``u`` (None: 28, the release's hard-coded value).
        variant: ``"paper"`` (float32, decimal cap, stable ties) or ``"official"`` (the release
            bit for bit, in the input dtype).
    Returns:
        Selection with merged ``tokens`` [K, D] (float32 for ``paper``, the input dtype for
        ``official``); K = ``ceil(r * N)`` when the cap binds, else ``N - |candidates|``.
    """
    variant = check_variant("framefusion_merge", variant, VARIANTS)
    threshold = check_range("threshold", threshold, -1.0, 1.0)  # a cosine
    if variant == OFFICIAL:
        layers = RELEASE_BUDGET_LAYERS if num_layers is None else check_int("num_layers", num_layers, 1)
        return official_merge_select(frames, ratio, threshold=threshold, num_layers=layers)
    if num_layers is not None:
        raise ValueError("framefusion_merge: num_layers is a parameter of variant='official' (the paper variant's "
                         f"cap is exactly 1 - r), got num_layers={num_layers!r}")
    num_frames, tokens_per_frame, dim = frames.shape
    total = num_frames * tokens_per_frame
    device = frames.device

    sims = previous_frame_similarity(frames)  # [T, P]
    candidate = sims >= threshold  # frame 0 is -inf, never a candidate
    cap = merge_cap(ratio, total)
    num_candidates = int(candidate.sum())
    if num_candidates >= cap:
        # Only the cap's worth, most similar first, ties to the lower flat index. The top `cap`
        # are all candidates because there are at least `cap` of them.
        order = torch.sort(sims.flatten(), descending=True, stable=True).indices[:cap]
        merged = torch.zeros(total, dtype=torch.bool, device=device)
        merged[order] = True
        merged = merged.view(num_frames, tokens_per_frame)
    else:
        merged = candidate

    # Each token's representative: the latest unmerged frame at or before it on its patch
    # (frame 0 is never merged, so one always exists).
    frame_index = torch.arange(num_frames, device=device)[:, None].expand(num_frames, tokens_per_frame)
    anchor_frame = torch.cummax(torch.where(merged, torch.zeros_like(frame_index), frame_index), dim=0).values
    anchor_flat = (anchor_frame * tokens_per_frame + torch.arange(tokens_per_frame, device=device)).flatten()

    x = frames.reshape(total, dim).float()
    sums = torch.zeros_like(x).index_add_(0, anchor_flat, x)
    counts = torch.bincount(anchor_flat, minlength=total)
    positions = torch.nonzero(~merged.flatten()).flatten()
    tokens = sums[positions] / counts[positions, None].to(sums.dtype)

    logger.debug("framefusion_merge: N=%d candidates=%d cap=%d -> %d tokens", total, num_candidates, cap,
                 positions.numel())
    return selection_from_positions(positions, num_frames, tokens_per_frame, tokens=tokens)


def official_merge_select(frames: torch.Tensor, ratio: float, *, threshold: float, num_layers: int) -> Selection:
    """The release's layer-0 merge on ``frames`` [T, P, D], in their dtype (see the module docstring).

    Returns the Selection of the unmerged tokens; ``tokens`` [K, D] in ``frames``' dtype.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    total = num_frames * tokens_per_frame
    device = frames.device
    # patch-major flat indices t * P + i: by patch, then frame (the release's order)
    order = torch.arange(total, device=device).view(num_frames, tokens_per_frame).t().reshape(-1)
    patch_of = torch.arange(tokens_per_frame, device=device).repeat_interleave(num_frames)
    ordered = frames.reshape(total, dim)[order]
    sims = adjacent_similarity(ordered, patch_of)
    choice = merge_choice(sims, threshold, pruning_ratio([], ratio, num_layers))
    tokens = merge_tokens(ordered, choice.merged)
    survivors = ~choice.merged
    logger.debug("framefusion_merge[official]: N=%d candidates share=%.4f capped=%s -> %d tokens", total,
                 choice.share, choice.capped, int(survivors.sum()))
    return selection_from_positions(order[survivors], num_frames, tokens_per_frame, tokens=tokens[survivors])
