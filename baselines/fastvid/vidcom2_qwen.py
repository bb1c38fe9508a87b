"""FastVID ``variant="vidcom2_qwen"``: the VidCom2 repository's Qwen re-implementation, bit for bit.

Follows xuyang-liu16/VidCom2, branch ``qwen`` @a85d485, ``token_compressor/fastvid/core.py``
(``compress_features``) and ``fastvid_algo.py`` L1-254 (``fastvid_compression``), the code behind
the paper's Qwen3-VL FastVID rows. It runs the per-segment loop of FastVID's Qwen2.5-VL release
(:func:`baselines.fastvid.release_loop.loop_release`) with these changes:

* **importance = the L2 norm of each token** (``tokens.float().norm(-1)``) instead of ViT
  attention: ``vision_attention`` is ignored (and not required);
* DySeg on ``F.normalize(frames.mean(1).float())`` (the mean in the input dtype, the rest float32),
  with the guard ``k = min(c - 1, T - 1)`` and one segment when nothing is cut;
* budgets: ``R = max(1, min(P, int(P r)))``; per segment ``R L`` (clamped to ``[1, L P]``),
  context ``max(1, int(R L d))`` (0 when ``R L = 1``), the "ignore" sub-segmentation (cosine
  ``< ignore`` between consecutive unit features of the segment; only the last frame of a
  sub-segment gets tokens), context spread over every ``p``-th sub-segment from the last and capped
  at ``P // 2``, salient at ``P - context``;
* salient tokens: ``topk(sorted=False)`` of the norms (its tie order);
* DPC-kNN with ``torch.rand * 1e-6`` (one ``[1, n]`` draw per context frame, in frame order, from
  the ``seed``-ed generator), ``k = min(4, n)``, centres sorted by index;
* DTM: each context frame's anchors take every segment token that is neither salient nor one of
  *its* anchors, by float32 ``F.normalize`` cosine (first maximum); counts, weights
  ``clamp(1 / (n + 1), min=beta)`` and the mean in the input dtype (bf16 arithmetic for bf16 input);
* ``r >= 1`` keeps every token; a segment without salient and context tokens keeps its top
  ``R L`` tokens by norm (the port's fallback).

Positions: the port keeps the salient tokens' and the anchors' own indices (``keep``) and slices
the Qwen3-VL position ids, attention mask, cache position and the deepstack features at them (the
deepstack rows are the anchors' own, unmerged); merged tokens take their anchor's slot, which is
what :class:`vcast.Selection` ``keep``/``tokens`` express.

Defaults (the port's environment defaults): ``c = 8``, ``tau = 0.84``, ``ignore = 0.99``,
``d = 0.5``, ``p = 4``, ``beta = 0.5``, DPC ``k = 4``; the ratio is ``R_RATIO``.

Registers nothing; :mod:`baselines.fastvid.method` dispatches here.
"""

from __future__ import annotations

import logging

import torch

from baselines.common.selection_output import selection_from_positions
from baselines.fastvid.release_loop import LoopOptions, loop_release
from vcast.selection import Selection

logger = logging.getLogger(__name__)

VIDCOM2_OPTIONS = LoopOptions(budgets="vidcom2_qwen", vidcom2=True)


def vidcom2_qwen_release(frames: torch.Tensor, ratio: float, *, num_segments: int, threshold: float,
                         ignore: float, context_ratio: float, anchor_period: int, beta: float, dpc_k: int,
                         generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The VidCom2 ``qwen`` FastVID on one video ``frames`` [T, P, D].

    Returns:
        (flat positions [K], tokens [K, D] in ``frames``' dtype).
    """
    num_frames, per_frame, dim = frames.shape
    if ratio >= 1.0:
        return torch.arange(num_frames * per_frame, device=frames.device), frames.reshape(-1, dim).clone()
    frames = frames.contiguous()
    importance = frames.reshape(-1, dim).float().norm(dim=-1).view(num_frames, per_frame)
    options = LoopOptions(budgets=VIDCOM2_OPTIONS.budgets, ignore=ignore, vidcom2=True)
    return loop_release(frames, ratio, importance, frames.mean(dim=1), num_segments=num_segments,
                        threshold=threshold, context_ratio=context_ratio, anchor_period=anchor_period,
                        beta=beta, dpc_k=dpc_k, generator=generator, options=options)


def vidcom2_qwen_select(frames: torch.Tensor, ratio: float, *, num_segments: int, threshold: float,
                        ignore: float, context_ratio: float, anchor_period: int, beta: float, dpc_k: int,
                        seed: int) -> Selection:
    """``variant="vidcom2_qwen"`` on ``frames`` [T, P, D]: :func:`vidcom2_qwen_release` with the DPC
    noise drawn from ``torch.Generator().manual_seed(seed)``.

    Returns:
        Selection with ``tokens`` [K, D] in ``frames``' dtype.
    """
    num_frames, tokens_per_frame, _ = frames.shape
    generator = torch.Generator().manual_seed(seed)
    keep, tokens = vidcom2_qwen_release(frames, ratio, num_segments=num_segments, threshold=threshold,
                                        ignore=ignore, context_ratio=context_ratio, anchor_period=anchor_period,
                                        beta=beta, dpc_k=dpc_k, generator=generator)
    logger.debug("fastvid vidcom2_qwen: kept %d of %d", keep.numel(), num_frames * tokens_per_frame)
    return selection_from_positions(keep, num_frames, tokens_per_frame, tokens=tokens)
