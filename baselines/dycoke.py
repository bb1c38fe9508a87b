"""DyCoke's temporal token merging (TTM), a pre-LLM pruning step.

Paper: "DyCoke: Dynamic Compression of Tokens for Fast Video Large Language Models", CVPR 2025.
Official code: KD-TAO/DyCoke@dd74634 ``llava/model/llava_arch.py`` ``dycole_ttm`` (inllm_methods.md
sections 8.1, 8.3-8.5); read against the snapshot 26dc6f4 of the same file. Port followed for the
ratio mapping: xuyang-liu16/VidCom2 branch ``qwen`` @a85d485
``token_compressor/dycoke/temporal_token_merging.py`` (reference_methods.md section 9.2).
Only TTM is implemented; DyCoke's second stage (decode-time KV selection) never touches prefill
and is out of scope here.

Algorithm on ``frames`` [T, P, D] (cosines in float32, same spatial position in two frames):

* pairs (i, i+1), i even: frame i is kept whole; frame i+1 keeps its ``n`` tokens least similar
  to frame i;
* quads: for i = 0, 4, ... < T - 4, frame i+2 is re-reduced against frame i (original
  features), keeping its ``n`` least similar tokens;
* ``n = floor((1 - K) * P)``, where ``K`` is DyCoke's pruned share of a reduced frame.

Defaults: ``k=None`` means ``K = 1 - r`` (so ``n = floor(r * P)``), the mapping of the VidCom2 Qwen
port. The official lmms-eval default is ``K = 0.7`` (``lmms_eval/models/llava_onevision.py``
L88-93; the builder default 0.3 is overridden there); pass ``k=0.7`` for it. No model inputs.
Pure pruning: the kept tokens are the input's own (no averaging, despite the name).

Budget (DyCoke defines its own count; it is NOT ``floor(r * T * P)``): the anchor frames stay
whole, so the method keeps ``A * P + (T - A) * n`` tokens, where the ``A`` whole frames are the
even frames except those re-reduced by the quad step (2, 6, ..., i.e. ``i % 4 == 2`` and
``i < T - 2``) and except the last frame of an odd ``T > 1``. For even T that is frames
0, 4, 8, ... plus frame T-2 when T is a multiple of 4. Example: T=32, P=196, r=0.25 -> frames
0, 4, ..., 28 and 30 whole, the other 23 keep n=49: 2891 of 6272 tokens (46.1%); with the official
K=0.7 (n=58) 49.4%, matching the table of inllm_methods.md section 8.1.

Deliberate deviations from the official code:

* Pairing: the official snapshot read (26dc6f4) picks frame i+1's tokens with the similarity row
  ``similarities[(i - 2) // 2]``, i.e. the PREVIOUS pair's cosines (pair 0 uses the last pair's),
  which looks like an indexing slip; we follow the paper, inllm_methods.md 8.1 and the VidCom2
  port: frame i+1 is ranked by its own cosine to frame i.
* Odd T: the official loop stops at T-2 and silently drops the last frame (0 tokens). We reduce
  the last frame against its predecessor T-2 (original features), like the second frame of a
  pair: the video's end stays visible, and it costs only ``n`` tokens (keeping it whole would add
  an extra anchor that the official count never has).
* T <= 4: the official quad step stacks an empty list and crashes; we skip the quad step.
  T = 1: the single frame is kept whole (as the VidCom2 port does).
* Order and ties: the official code lists a reduced frame's tokens in ``topk(largest=False)``
  order (ascending similarity) and leaves ties to ``topk``; positions are a set here, so the
  order does not matter (they are returned ascending), and ties go to the lower token index
  (stable sort).
* ``n`` is computed on the decimal values of K (or r), not on binary floats: ``K = 0.9, P = 10``
  gives ``n = 1`` where the official ``int((1 - 0.9) * 10)`` gives 0.
* Cosine: ``a.b / (|a| |b| + eps)`` in float32 (zero vectors give 0) instead of
  ``F.cosine_similarity`` on the model dtype.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import torch

from baselines.selection_output import selection_from_positions
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.temporal import cosine
from vcast.validation import check_range

logger = logging.getLogger(__name__)


def reduced_frame_keep(ratio: float, tokens_per_frame: int, k: float | None = None) -> int:
    """``n = floor((1 - K) * P)`` on decimal values; ``K = 1 - ratio`` when ``k`` is None."""
    keep_share = Fraction(repr(float(ratio))) if k is None else 1 - Fraction(repr(float(k)))
    return math.floor(keep_share * tokens_per_frame)


def reference_frames(num_frames: int) -> torch.Tensor:
    """For each frame, the frame it is reduced against, or -1 if it is kept whole: LongTensor [T]."""
    t = torch.arange(num_frames)
    ref = torch.full((num_frames,), -1, dtype=torch.long)
    odd = t % 2 == 1
    ref[odd] = t[odd] - 1  # second frame of a pair, against the pair's first
    quad = (t % 4 == 2) & (t < num_frames - 2)  # i + 2 for i = 0, 4, ... < T - 4
    ref[quad] = t[quad] - 2
    if num_frames > 1 and num_frames % 2 == 1:
        ref[-1] = num_frames - 2  # odd T: the unpaired last frame, against its predecessor
    return ref


def dycoke_kept_count(num_frames: int, tokens_per_frame: int, keep_per_frame: int) -> int:
    """DyCoke's own total: ``A * P + (T - A) * n`` with ``A`` the whole (anchor) frames."""
    anchors = int((reference_frames(num_frames) < 0).sum())
    return anchors * tokens_per_frame + (num_frames - anchors) * keep_per_frame


@register_method("dycoke", inputs=())
def dycoke_select(frames: torch.Tensor, ratio: float, *, k: float | None = None) -> Selection:
    """DyCoke TTM on ``frames`` [T, P, D]: anchor frames whole, the others keep ``n`` tokens.

    Args:
        frames: float [T, P, D], any dtype and device.
        ratio: r in (0, 1]; used only when ``k`` is None (``K = 1 - r``).
        k: DyCoke's K, the share of tokens pruned in a reduced frame (official default 0.7).
    Returns:
        Selection with ``A * P + (T - A) * n`` kept positions (see the module docstring).
    """
    if k is not None:
        k = check_range("k", k, 0.0, 1.0)  # the pruned share of a reduced frame
    num_frames, tokens_per_frame, _ = frames.shape
    device = frames.device
    keep_n = reduced_frame_keep(ratio, tokens_per_frame, k)

    ref = reference_frames(num_frames)
    whole = torch.nonzero(ref < 0).flatten()
    reduced = torch.nonzero(ref >= 0).flatten()
    token_index = torch.arange(tokens_per_frame, device=device)
    pieces = [(whole.to(device)[:, None] * tokens_per_frame + token_index).flatten()]

    if reduced.numel() and keep_n > 0:
        x = frames.float()
        sims = cosine(x[reduced.to(device)], x[ref[reduced].to(device)])  # [R, P]
        # Least similar first; stable, so equal cosines go to the lower token index.
        lowest = torch.sort(sims, dim=1, stable=True).indices[:, :keep_n]  # [R, n]
        pieces.append((reduced.to(device)[:, None] * tokens_per_frame + lowest).flatten())

    positions = torch.cat(pieces)
    logger.debug("dycoke: T=%d P=%d n=%d anchors=%d -> %d tokens", num_frames, tokens_per_frame,
                 keep_n, whole.numel(), positions.numel())
    return selection_from_positions(positions, num_frames, tokens_per_frame)
