"""VisionZip ``variant="official"``: HoliTom's per-frame video adaptation, in the input dtype.

Follows cokeshao/HoliTom @e9b2972, ``visionzip/llava_arch.py`` L29-183 (the nested
``visionzip`` of ``prepare_inputs_labels_for_multimodal``), the code behind the LLaVA-OneVision /
LLaVA-Video VisionZip rows. It is the image algorithm of dvlab-research/VisionZip @3151f6d
(``visionzip/clip_encoder.py`` L45-80: CLS-row attention, CLS always kept, pre-projector CLIP
states) moved to video: every frame is one "image" of the batch, SigLIP has no CLS so the
attention is the column mean over heads and queries, and the features, attention and key metric
are the post-projector, 2-D pooled ones.

Per frame, with ``s`` = SPATIAL_TOKENS tokens out of P, everything in ``frames``' dtype:

* ``dominant = int(s * dominant_ratio)`` tokens by ``attention.topk(dominant, dim=1)`` (the
  release's call, so its tie order), output in ascending index order (their ``masked_select``);
* the ``N = P - dominant`` others, in index order: keys divided by their bare ``norm`` (a zero
  key gives NaN, as in the release), targets ``arange(0, N, max(1, N // c))[:c]`` with
  ``c = s - dominant``, every other token to ``argmax`` (first maximum) of its ``bmm`` cosine;
  contextual = ``target + bmm(one_hot^T, assigned) / counts.clamp(min=1)`` (a SUM of the target
  and the mean), one-hot and counts in the input dtype as the release builds them.

Output order (what a compact-position LLM sees): ``newline_position="one_token"`` (LLaVA-OV,
and the HF LLaVA-Video layout this harness runs) gives per frame ``[dominant..., contextual...]``;
``"grid"`` (the original LLaVA-Video) sorts the ``cat`` of the *topk-ordered* dominant indices and
the targets while the dominant tokens are in index order, so dominant tokens land on one another's
slots (the release's quirk, reproduced). A Selection's ``keep`` must ascend, so ``keep`` is the
frame's sorted ``dominant + target`` indices and row ``k`` of ``tokens`` is the release's k-th
output token: the slots carry the order, not each token's origin (positions="original" would
number a token by its slot). Grid mode's per-row newline tokens are not expressible (the adapter
has one newline per video).
"""

from __future__ import annotations

import logging
from typing import Optional

import torch

from vcast.selection import Selection

logger = logging.getLogger(__name__)


def official_compress(frames: torch.Tensor, attention: torch.Tensor, keys: torch.Tensor, spatial_tokens: int,
                      dominant_ratio: float, newline_position: str) -> tuple[torch.Tensor, torch.Tensor]:
    """HoliTom's VisionZip on every frame (module docstring), in ``frames``' dtype.

    Args:
        frames: [T, P, D] tokens (any float dtype; the arithmetic stays in it).
        attention: [T, P] attention received, same dtype as ``frames``.
        keys: [T, P, d] merge metric, same dtype as ``frames``.
        spatial_tokens: ``s`` per frame, 1 <= s <= P.
        dominant_ratio: the release's DOMINANT_RATIO.
        newline_position: ``one_token`` | ``grid`` (the output order, see the module docstring).
    Returns:
        (slots [T, s] LongTensor ascending per frame, tokens [T, s, D] in ``frames``' dtype): row
        ``k`` of a frame is the release's k-th output token, written at slot ``k``.
    """
    num_frames, tokens_per_frame, dim = frames.shape
    dominant = int(spatial_tokens * dominant_ratio)
    contextual = spatial_tokens - dominant
    top = attention.topk(dominant, dim=1).indices  # [T, dominant], the release's order
    rest = torch.ones(num_frames, tokens_per_frame, dtype=torch.bool, device=frames.device).scatter_(1, top, False)
    dominant_idx = (~rest).nonzero()[:, 1].view(num_frames, dominant)  # ascending, like masked_select
    remaining = tokens_per_frame - dominant
    rest_idx = rest.nonzero()[:, 1].view(num_frames, remaining)

    def take(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, idx[..., None].expand(-1, -1, x.shape[-1]))

    dominant_tokens = take(frames, dominant_idx)
    if contextual == 0:  # the release divides by zero here (only dominant_ratio = 1 gets here)
        return dominant_idx, dominant_tokens
    rest_keys = take(keys, rest_idx)
    unit = rest_keys / rest_keys.norm(dim=-1, keepdim=True)  # bare norm, in the input dtype
    step = max(1, remaining // contextual)
    target = torch.arange(0, remaining, step, device=frames.device)[:contextual]
    other = ~torch.isin(torch.arange(remaining, device=frames.device), target)
    similarity = torch.bmm(unit[:, other], unit[:, target].transpose(1, 2))  # [T, N - c, c]
    rest_tokens = take(frames, rest_idx)
    assign = torch.zeros(num_frames, similarity.shape[1], contextual, dtype=frames.dtype, device=frames.device)
    assign.scatter_(2, similarity.argmax(dim=2).unsqueeze(-1), 1)
    counts = assign.sum(dim=1).clamp(min=1).unsqueeze(-1)  # in the input dtype, as the release
    merged = rest_tokens[:, target] + torch.bmm(assign.transpose(1, 2), rest_tokens[:, other]) / counts

    target_idx = rest_idx[:, target]
    tokens = torch.cat([dominant_tokens, merged], dim=1)  # [T, s, D]
    if newline_position == "grid":
        # The release pairs the topk-ordered positions with index-ordered dominant tokens.
        order = torch.sort(torch.cat([top, target_idx], dim=1), dim=1).indices
        tokens = torch.gather(tokens, 1, order[..., None].expand(-1, -1, dim))
    slots = torch.sort(torch.cat([dominant_idx, target_idx], dim=1), dim=1).values
    return slots, tokens


def official_selection(frames: torch.Tensor, attention: torch.Tensor, keys: Optional[torch.Tensor],
                       spatial_tokens: int, dominant_ratio: float, newline_position: str) -> Selection:
    """``variant="official"``: every frame keeps ``spatial_tokens``, computed in ``frames``' dtype."""
    num_frames, tokens_per_frame, _ = frames.shape
    dtype = frames.dtype  # the release's attention and metric come out of the tower in the model dtype
    slots, tokens = official_compress(frames, attention.to(dtype), (frames if keys is None else keys).to(dtype),
                                      spatial_tokens, dominant_ratio, newline_position)
    offsets = torch.arange(num_frames, device=frames.device)[:, None] * tokens_per_frame
    logger.debug("visionzip official: T=%d P=%d s=%d dominant_ratio=%.4g %s %s", num_frames, tokens_per_frame,
                 spatial_tokens, dominant_ratio, newline_position, dtype)
    return Selection(keep=(slots + offsets).reshape(-1), tokens_per_frame=tokens_per_frame,
                     budgets=torch.full((num_frames,), slots.shape[1], dtype=torch.long, device=frames.device),
                     tokens=tokens.reshape(-1, tokens.shape[-1]))
