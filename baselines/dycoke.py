"""DyCoke's temporal token merging (TTM), a pre-LLM pruning step; variants paper | official | vidcom2_qwen.

Paper: "DyCoke: Dynamic Compression of Tokens for Fast Video Large Language Models", CVPR 2025.
Official code: KD-TAO/DyCoke@dd74634 ``llava/model/llava_arch.py`` ``dycole_ttm`` (inllm_methods.md
sections 8.1, 8.3-8.5). Qwen3-VL port: xuyang-liu16/VidCom2 branch ``qwen`` @a85d485
``token_compressor/dycoke/core.py`` + ``temporal_token_merging.py`` (reference_methods.md 9.2).
Only TTM is implemented, in every variant: DyCoke's second stage (dynamic KV-cache pruning while
decoding, ``modeling_qwen2.py`` ``dycoke_pruning``) is NOT implemented here. It never touches
prefill, so single-token answers are unaffected; longer answers decode over the full TTM cache.

Algorithm on ``frames`` [T, P, D] (cosine of the same spatial position in two frames):

* pairs (i, i+1), i even: frame i is kept whole; frame i+1 keeps its ``n`` tokens least similar
  to frame i;
* quads: for i = 0, 4, ... < T - 4, frame i+2 is re-reduced against frame i (original
  features), keeping its ``n`` least similar tokens;
* ``n = (1 - K) * P`` truncated, where ``K`` is DyCoke's pruned share of a reduced frame.
Pure pruning: the kept tokens are the input's own (no averaging, despite the name).

Variants (``variant=``; ``k=None`` is resolved per variant):

* ``"paper"`` (default; unchanged): ``K = 1 - r`` when ``k`` is None (``n = floor(r * P)``, the
  VidCom2 mapping), ``n`` from the decimal values (``K = 0.9, P = 10`` gives 1 where binary floats
  give 0); cosine ``a.b / (|a| |b| + eps)`` in float32 whatever the input dtype (bf16 and float32
  give the same result); ties to the lower token index (stable sort); positions ascending.
  Deliberate deviations from the release: odd T reduces the last frame against frame T-2 (the
  video's end stays visible, for ``n`` tokens) where the release drops it; T <= 4 skips the quad
  step (the release raises); T = 1 keeps the frame whole.
* ``"official"``: ``dycole_ttm`` at dd74634, bit for bit on CPU in float32 and bf16 (arithmetic in
  the input dtype, see ``baselines/dycoke_official.py``): pairs ranked by
  ``F.cosine_similarity(F.normalize(.), F.normalize(.))``, quads by ``F.cosine_similarity`` of the
  raw features, each frame's 1-D row through ``topk(n, largest=False)`` (its tie order),
  ``n = int((1 - K) * P)`` in binary floats (K = 0.7, P = 196: 58), **odd T drops the last frame**
  (0 tokens; the paper variant reduces it instead). Default ``k=None`` -> K = 0.7, the release's
  lmms-eval default (``llava_onevision.py`` L88-93; ``builder.py``'s 0.3 is overridden there);
  ``ratio`` is unused. The release emits a reduced frame's tokens in ascending-cosine order, not
  spatial order; this variant returns those rows as ``Selection.tokens`` in that order on the
  frame's kept slots (ascending), so with LLaVA's compact positions the LLM sees the release's
  sequence exactly (on a model that keeps positions, e.g. Qwen3-VL, a row then takes its slot's
  position, not its own: use vidcom2_qwen there). The index slip ``similarities[(i - 2) // 2]``
  of the first commit 26dc6f4 was fixed in 35cc532 ("Update ttm code", an ancestor of dd74634):
  dd74634 ranks frame i+1 by its own pair's row, and so do we. Only where the release cannot run
  do we extend it: T <= 4 (its ``torch.stack([])`` of the empty quad list raises) skips the quad
  step, as the VidCom2 port does; T = 1 keeps the frame whole.
* ``"vidcom2_qwen"``: the VidCom2 port, bit for bit on CPU in float32 and bf16: the same release
  arithmetic in the input dtype; ``DYCOKE_K`` (our ``k``) defaults to ``1 - R_RATIO`` (``1 - r``)
  and a reduced frame keeps ``int((1 - K) * P)`` with the port's float clamps (r = 0.1, P = 10
  gives 0); odd T drops the last frame; T = 1 kept whole; T <= 4 no quad step; the kept indices
  deduplicated and sorted (``torch.unique``), each token at its own place (the port slices the
  MRoPE ids, so positions are preserved); no ``tokens``. Its env knob
  ``DYCOKE_NUM_TOKENS_PER_FRAME`` is not a parameter (P comes from ``frames``).

Measured agreement with the released codes loaded at run time on CPU
(a comparison outside the project, docs/fidelity.md; random, nearly static, slowly
drifting, tied and repeated-vector videos, T = 1..40, P = 1..196, K / r varied): official
(the LLM's token sequence) fp32 268/268, bf16 260/260 exact (plus 32 / 40 cases with T <= 4 where
the release raises; there ours equals the VidCom2 port's sequence in all); vidcom2_qwen (kept
indices) fp32 300/300, bf16 300/300 exact. For context, the paper variant's kept set equals the
release's in 159/268 fp32 and 122/260 bf16 of those cases (same K), and on bf16 inputs the
release's bf16 arithmetic picks another kept set than float32 arithmetic in 53/133 such cases.

Budget (DyCoke defines its own count; it is NOT ``floor(r * T * P)``): the anchor frames stay
whole, so the paper variant keeps ``A * P + (T - A) * n`` tokens, where the ``A`` whole frames are
the even frames except those re-reduced by the quad step (2, 6, ..., i.e. ``i % 4 == 2`` and
``i < T - 2``) and except the last frame of an odd ``T > 1`` (the release variants keep 0 there).
For even T that is frames 0, 4, 8, ... plus frame T-2 when T is a multiple of 4. Example: T=32,
P=196, r=0.25 -> frames 0, 4, ..., 28 and 30 whole, the other 23 keep n=49: 2891 of 6272 tokens
(46.1%); with the official K=0.7 (n=58) 49.4%, matching the table of inllm_methods.md section 8.1.
No model inputs.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import torch

from baselines.dycoke_official import OFFICIAL_K, official_keep_count, release_order, vidcom2_qwen_keep_count
from baselines.common.selection_output import selection_from_positions
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.temporal import cosine
from vcast.validation import check_range
from vcast.variants import OFFICIAL, PAPER, VIDCOM2_QWEN, check_variant

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


@register_method("dycoke", inputs=(), variants=(PAPER, OFFICIAL, VIDCOM2_QWEN))
def dycoke_select(frames: torch.Tensor, ratio: float, *, k: float | None = None,
                  variant: str = PAPER) -> Selection:
    """DyCoke TTM on ``frames`` [T, P, D]: anchor frames whole, the others keep ``n`` tokens.

    Args:
        frames: float [T, P, D], any dtype and device.
        ratio: r in (0, 1]; used only when ``k`` is None and the variant maps ``K = 1 - r``
            (paper, vidcom2_qwen); unused by ``official`` (its default K is 0.7).
        k: DyCoke's K, the share of tokens pruned in a reduced frame. None: ``1 - r`` (paper,
            vidcom2_qwen), 0.7 (official).
        variant: "paper" (float32 cosines, decimal count, odd T reduces the last frame),
            "official" (KD-TAO/DyCoke's ``dycole_ttm``) or "vidcom2_qwen" (the VidCom2 qwen port).
    Returns:
        Selection with ``A * P + (T - A) * n`` kept positions for "paper" (see the module
        docstring); for "official" and "vidcom2_qwen" the last frame of an odd T keeps none.
        "official" also returns ``tokens`` [K, D]: the kept rows in the release's output order.
    """
    variant = check_variant("dycoke", variant, (PAPER, OFFICIAL, VIDCOM2_QWEN))
    if k is not None:
        k = check_range("k", k, 0.0, 1.0)  # the pruned share of a reduced frame
    if variant == OFFICIAL:
        return _official(frames, OFFICIAL_K if k is None else k)
    if variant == VIDCOM2_QWEN:
        return _vidcom2_qwen(frames, ratio, k)
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


def _official(frames: torch.Tensor, k: float) -> Selection:
    """KD-TAO/DyCoke ``dycole_ttm``: the kept set, and its rows in the release's order as ``tokens``."""
    num_frames, tokens_per_frame, dim = frames.shape
    order = release_order(frames, official_keep_count(k, tokens_per_frame))
    # Frames come out in frame order, so the k-th output row takes the k-th kept slot ascending.
    slots = torch.sort(order).values
    rows = frames.reshape(num_frames * tokens_per_frame, dim).index_select(0, order)
    return selection_from_positions(slots, num_frames, tokens_per_frame, tokens=rows)


def _vidcom2_qwen(frames: torch.Tensor, ratio: float, k: float | None) -> Selection:
    """VidCom2 ``qwen`` port: the release's kept set, deduplicated and sorted (positions kept)."""
    num_frames, tokens_per_frame, _ = frames.shape
    order = release_order(frames, vidcom2_qwen_keep_count(ratio, tokens_per_frame, k))
    keep = torch.unique(order, sorted=True)
    if keep.numel() == 0:  # the port's fallback; unreachable for P >= 1 (frame 0 stays whole)
        keep = torch.zeros(1, dtype=torch.long, device=frames.device)
    return selection_from_positions(keep, num_frames, tokens_per_frame)
