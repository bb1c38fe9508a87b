"""VisionZip ``variant="vidcom2_qwen"``: the VidCom2 ``qwen``-branch re-implementation, in the input dtype.

Follows xuyang-liu16/VidCom2 branch ``qwen`` @a85d485 (the "May version"):
``token_compressor/visionzip/core.py`` L19-59 (``compress_features``) and
``token_compressor/visionzip/visionzip.py`` L16-268 (``visionzip_compression`` with
``cls_token=False``), the code behind the paper's Qwen3-VL VisionZip rows. Everything runs in
``frames``' dtype (bf16 on the model), as there:

* the "attention" is the token L2 norm ``frames.norm(dim=-1)``: no vision-encoder attention and
  no key metric are used (``vision_attention`` / ``vision_keys`` are ignored when supplied);
* per frame (temporal patch) ``num_keep = max(1, int(P * r))``, ``dominant = max(1,
  int(num_keep * dominant_ratio))`` by ``topk`` of the norm (then sorted), ``c = num_keep -
  dominant`` contextual tokens;
* on the non-dominant tokens of a frame (index order): density = mean of the 2nd..(k+1)-th
  largest of the ``bmm`` of the ``F.normalize``d tokens (``topk`` sorted, the first column dropped
  as "self"); the ``c`` densest (``topk`` then ``sort``) are anchors; if there are more tokens
  than anchors every token (anchors included) goes to the ``argmax`` (first maximum) of its
  ``mm`` cosine to the anchors, and the contextual token is the plain ``mean(dim=0)`` of the
  tokens assigned to an anchor, or the anchor itself if none is; it takes the anchor's index;
* per frame the kept tokens are sorted by index (each token at its own, or its anchor's, place).

The release pads the contextual list with index 0 (and a zero feature) when fewer tokens remain
than ``c``; that branch cannot run here: ``num_keep <= P`` for ``r <= 1`` and the dominant
indices are distinct, so ``P - dominant >= c``. (A duplicate keep index would not be expressible:
``Selection.keep`` is unique.) With one remaining token the density is the mean of nothing
(NaN) and that token is the anchor, as in the release.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from vcast.selection import Selection

logger = logging.getLogger(__name__)


def vidcom2_qwen_counts(tokens_per_frame: int, ratio: float, dominant_ratio: float) -> tuple[int, int]:
    """``(num_keep, dominant)`` per frame, the release's integer arithmetic."""
    num_keep = max(1, int(tokens_per_frame * ratio))
    return num_keep, max(1, int(num_keep * dominant_ratio))


def _contextual(rest: torch.Tensor, count: int, k_neighbors: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Density anchors and their merged tokens for one frame's non-dominant tokens ``rest`` [N, D].

    Returns:
        (anchor rows [count] into ``rest``, ascending; merged tokens [count, D]).
    """
    unit = F.normalize(rest.unsqueeze(0), dim=-1)
    similarity = torch.bmm(unit, unit.transpose(1, 2))  # [1, N, N]
    nearest = torch.topk(similarity, k=min(k_neighbors + 1, rest.shape[0]), dim=2).values
    density = nearest[:, :, 1:].mean(dim=2)[0]  # [N]; NaN when N = 1 (as the release)
    anchors = torch.sort(torch.topk(density, k=count, dim=0).indices).values
    anchor_tokens = rest[anchors]
    if count == rest.shape[0]:
        return anchors, anchor_tokens
    cosine = torch.mm(F.normalize(rest, dim=-1), F.normalize(anchor_tokens, dim=-1).t())  # [N, count]
    labels = cosine.argmax(dim=1)
    merged = []
    for i in range(count):  # the release's loop: the same mean(dim=0) reduction, bit for bit
        members = labels == i
        merged.append(rest[members].mean(dim=0) if bool(members.any()) else anchor_tokens[i])
    return anchors, torch.stack(merged)


def vidcom2_qwen_compress(frames: torch.Tensor, ratio: float, dominant_ratio: float,
                          k_neighbors: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The qwen-branch VisionZip on every frame (module docstring), in ``frames``' dtype.

    Args:
        frames: [T, P, D] post-merger tokens.
        ratio: r in (0, 1].
        dominant_ratio: share of ``num_keep`` kept by norm, in [0, 1].
        k_neighbors: k of the kNN density (>= 1).
    Returns:
        (local indices [T, num_keep] ascending per frame, tokens [T, num_keep, D] in ``frames``' dtype).
    """
    num_frames, tokens_per_frame, dim = frames.shape
    num_keep, dominant = vidcom2_qwen_counts(tokens_per_frame, ratio, dominant_ratio)
    dominant = min(dominant, tokens_per_frame)
    contextual = num_keep - dominant
    norms = frames.norm(dim=-1)  # [T, P], the attention proxy
    dominant_idx = torch.sort(torch.topk(norms, k=dominant, dim=1).indices, dim=1).values
    dominant_tokens = torch.gather(frames, 1, dominant_idx[..., None].expand(-1, -1, dim))
    if contextual <= 0:
        return dominant_idx, dominant_tokens
    rest_mask = torch.ones(num_frames, tokens_per_frame, dtype=torch.bool, device=frames.device)
    rest_mask.scatter_(1, dominant_idx, False)
    indices, tokens = [], []
    for t in range(num_frames):
        rest_idx = torch.where(rest_mask[t])[0]
        anchors, merged = _contextual(frames[t, rest_mask[t]], contextual, k_neighbors)
        local = torch.cat([dominant_idx[t], rest_idx[anchors]])
        order = torch.argsort(local)  # unique indices: the order is well defined
        indices.append(local[order])
        tokens.append(torch.cat([dominant_tokens[t], merged])[order])
    return torch.stack(indices), torch.stack(tokens)


def vidcom2_qwen_selection(frames: torch.Tensor, ratio: float, dominant_ratio: float, k_neighbors: int) -> Selection:
    """``variant="vidcom2_qwen"``: ``max(1, int(P r))`` tokens per frame, in ``frames``' dtype."""
    num_frames, tokens_per_frame, _ = frames.shape
    local, tokens = vidcom2_qwen_compress(frames, ratio, dominant_ratio, k_neighbors)
    offsets = torch.arange(num_frames, device=frames.device)[:, None] * tokens_per_frame
    logger.debug("visionzip vidcom2_qwen: T=%d P=%d r=%.4g keep=%d dominant_ratio=%.4g k=%d %s", num_frames,
                 tokens_per_frame, ratio, local.shape[1], dominant_ratio, k_neighbors, frames.dtype)
    return Selection(keep=(local + offsets).reshape(-1), tokens_per_frame=tokens_per_frame,
                     budgets=torch.full((num_frames,), local.shape[1], dtype=torch.long, device=frames.device),
                     tokens=tokens.reshape(-1, tokens.shape[-1]))
