"""FastVID's released per-segment loop and the release's shared pieces (LunarShen/FastVID @a40a109).

The loop (:func:`loop_release`) is the LLaVA-Video release (``fastvid_llavavideo/.../modeling_qwen2.py``
L893-1091) and the Qwen2.5-VL release
(``fastvid_qwen25vl/lmms-eval/lmms_eval/models/qwenvlutils/modeling_qwen2_5_vl.py`` L1889-2099) of
``variant="official"`` (:mod:`baselines.fastvid.official`), and with the VidCom2 port's budgets and
precision (:class:`LoopOptions`) ``variant="vidcom2_qwen"`` (:mod:`baselines.fastvid.vidcom2_qwen`).
The shared pieces (DySeg cuts, DPC-kNN scores, the DTM merge) are also the LLaVA-OneVision
release's. Dtypes, noise and refusals: :mod:`baselines.fastvid.official`.

Registers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import torch
import torch.nn.functional as F

LLAVA_VIDEO = "llava_video"
QWEN2_5_VL = "qwen2_5_vl"
NOISE_SCALE = 1e-6


def release_similarities(features: torch.Tensor, float32: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit frame features and consecutive cosines: ``features`` [T, D] -> ([T, D], [T - 1]).

    The releases divide by the raw norm in the features' dtype; the VidCom2 port (``float32``)
    upcasts and uses ``F.normalize`` (norm clamped at 1e-12).
    """
    if float32:
        unit = F.normalize(features.float(), dim=-1)
    else:
        unit = features / features.norm(dim=1, keepdim=True)
    return unit, (unit[:-1] * unit[1:]).sum(dim=1)


def _cut_list_sizes(num_frames: int, cuts: torch.Tensor, what: str) -> list[int]:
    """Segment sizes from sorted cuts, as the loop releases compute them (IndexError there on no cut)."""
    if cuts.numel() == 0:
        raise ValueError(f"official FastVID: {what} found no cut at all; the release indexes cut_indices[0] "
                         "and fails (use num_segments >= 2)")
    values = cuts.tolist()
    sizes = [values[0] + 1] + [b - a for a, b in pairwise(values)]
    sizes.append(num_frames - values[-1] - 1)
    return sizes


def release_dyseg_cuts(similarities: torch.Tensor, num_segments: int, threshold: float) -> torch.Tensor:
    """DySeg cuts as released: ``unique(topk(s, c - 1, largest=False) ∪ {t : s_t < tau})``, sorted.

    Raises:
        ValueError: when ``T - 1 < c - 1``, where the release's ``topk`` raises.
    """
    transitions = similarities.numel()
    if transitions < num_segments - 1:
        raise ValueError(f"official FastVID DySeg needs T - 1 >= c - 1 frame transitions: topk(similarities, "
                         f"c - 1 = {num_segments - 1}) on T - 1 = {transitions} raises in the release "
                         "(use more frames, a smaller num_segments, or variant='paper'/'vidcom2_qwen', "
                         "which guard k = min(c - 1, T - 1))")
    lowest = torch.topk(similarities, num_segments - 1, largest=False).indices
    below = torch.nonzero(similarities < threshold, as_tuple=False).squeeze(1)
    return torch.unique(torch.cat([lowest, below])).sort().values


def release_density_scores(tokens: torch.Tensor, dpc_k: int, generator: torch.Generator,
                           clamp_k: bool = False) -> torch.Tensor:
    """DPC-kNN score ``delta * rho`` as released, batched: ``tokens`` [B, n, D] -> [B, n] float32.

    ``rho = exp(-mean of the dpc_k smallest d^2) + U(0, 1) * 1e-6`` (one ``[B, n]`` draw from
    ``generator``); ``delta`` = the distance to the nearest denser token, the largest distance of the
    whole batch row's matrix for the densest (a 0/1 mask in the tokens' dtype, as released).
    ``clamp_k``: ``k = max(1, min(dpc_k, n))`` (VidCom2 port); otherwise ``n < dpc_k`` raises.
    """
    count = tokens.shape[-2]
    k = max(1, min(dpc_k, count)) if clamp_k else dpc_k
    if count < k:
        raise ValueError(f"official FastVID: the DPC-kNN density takes the {k} nearest of {count} non-salient "
                         "tokens; the release's topk raises (a lower ratio or context_ratio leaves more)")
    wide = tokens.float()
    distances = torch.cdist(wide, wide) / (tokens.shape[-1] ** 0.5)
    nearest = torch.topk(distances, k=k, dim=-1, largest=False).values
    density = (-(nearest**2).mean(dim=-1)).exp()
    noise = torch.rand(density.shape, generator=generator, dtype=density.dtype).to(density.device)
    density = density + noise * NOISE_SCALE
    denser = (density[:, None, :] > density[:, :, None]).type(tokens.dtype)
    farthest = distances.flatten(1).max(dim=-1).values[:, None, None]
    delta = (distances * denser + farthest * (1 - denser)).min(dim=-1).values
    return delta * density


def merge_weighted(anchors: torch.Tensor, assignment: torch.Tensor, pool: torch.Tensor,
                   beta: float) -> torch.Tensor:
    """DTM merge as released: anchor ``a`` -> ``w x_a + (1 - w) mean(assigned)``.

    Batched (``bmm``, the LLaVA-OneVision release) or not (``mm``, the loop releases): the two
    kernels may round bf16 differently, so each release's own is called.

    Args:
        anchors: [B, n, D] or [n, D] anchor tokens.
        assignment: [B, m, n] or [m, n] one-hot (in the tokens' dtype, so its column sums, the
            counts, are rounded to that dtype as released).
        pool: [B, m, D] or [m, D] the tokens assigned.
        beta: ``w = clamp(1 / (count + 1), min=beta)``; the mean divides by ``clamp(count, min=1)``.
    Returns:
        merged anchors shaped like ``anchors``, in the tokens' dtype.
    """
    axis = assignment.dim() - 2
    weight = (1 / (assignment.sum(dim=axis).unsqueeze(-1) + 1)).clamp(min=beta)
    counts = assignment.sum(dim=axis).clamp(min=1).unsqueeze(-1)
    if axis:
        means = torch.bmm(assignment.transpose(1, 2), pool) / counts
    else:
        means = torch.mm(assignment.T, pool) / counts
    return weight * anchors + (1 - weight) * means


def one_hot_nearest(similarity: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[..., m, n]`` similarities -> one-hot of the first maximum over ``n``, in ``dtype``."""
    assignment = torch.zeros(similarity.shape, dtype=dtype, device=similarity.device)
    assignment.scatter_(-1, similarity.argmax(dim=-1).unsqueeze(-1), 1)
    return assignment


@dataclass(frozen=True)
class LoopOptions:
    """What distinguishes the loop releases.

    Attributes:
        budgets: ``"llava_video"``, ``"qwen2_5_vl"`` or ``"vidcom2_qwen"`` (:func:`segment_budgets`).
        ignore: the ``DySeg_ignore`` sub-segmentation threshold (None: none, LLaVA-Video).
        vidcom2: the VidCom2 port's precision and guards: float32 segmentation (``F.normalize`` of
            the upcast frame means) with ``k = min(c - 1, T - 1)``, ``topk(sorted=False)`` for the
            salient tokens, clamped DPC ``k`` and centre count, float32 ``F.normalize`` merge
            similarities, its ``max(1, ...)`` budget floors and its fallbacks.
    """

    budgets: str
    ignore: float | None = None
    vidcom2: bool = False


def _spread(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _inner_sizes(unit: torch.Tensor, ignore: float, vidcom2: bool) -> list[int]:
    """Sub-segments of one segment: cut where consecutive unit features have cosine < ``ignore``."""
    length = unit.shape[0]
    cuts = torch.nonzero((unit[:-1] * unit[1:]).sum(dim=1) < ignore, as_tuple=False).squeeze(-1)
    if vidcom2:
        return vidcom2_sizes(length, cuts)
    cuts = cuts.sort().values
    return _cut_list_sizes(length, cuts, "") if cuts.numel() else [length]


def vidcom2_sizes(num_frames: int, cuts: torch.Tensor) -> list[int]:
    """Segment sizes from cuts, VidCom2 port: cuts outside ``[0, T - 2]`` dropped, none -> ``[T]``."""
    cuts = cuts.long()
    cuts = torch.unique(cuts[(cuts >= 0) & (cuts < num_frames - 1)], sorted=True)
    if cuts.numel() == 0:
        return [num_frames]
    return [size for size in _cut_list_sizes(num_frames, cuts, "") if size > 0]


def segment_budgets(length: int, retain: int, per_frame: int, unit: torch.Tensor, context_ratio: float,
                    anchor_period: int, options: LoopOptions) -> tuple[list[int], list[int], int]:
    """Salient and context tokens of each frame of one segment of ``length`` frames.

    ``retain`` is the per-frame ``R = int(P r)``. LLaVA-Video: ``C = int(R L d)``, the salient rest
    spread over the frames (remainder first), ``C`` over ``ceil(L / p)`` anchor frames (the last and
    every ``p``-th back, remainder to the last). Qwen2.5-VL: ``C = max(int(R L d), 1)``, the same
    spread over the ``DySeg_ignore`` sub-segments, whose last frames alone get tokens, context capped
    at ``P // 2``, salient at ``P - context``. VidCom2: as Qwen2.5-VL with its own floors.

    Returns:
        (salient per frame, context per frame, the segment's ``R L`` after the port's clamps).
    """
    if options.vidcom2:
        segment_retain = max(1, min(length * per_frame, retain * length))
        context = max(1, int(segment_retain * context_ratio)) if segment_retain > 1 else 0
        context = min(context, segment_retain)
    else:
        segment_retain = retain * length
        context = int(segment_retain * context_ratio)
        if options.budgets == QWEN2_5_VL:
            context = max(context, 1)
    salient = segment_retain - context
    if length == 1:
        return [salient], [context], segment_retain
    if options.ignore is None:  # LLaVA-Video: every frame is its own unit
        sizes = [1] * length
    else:
        sizes = _inner_sizes(unit, options.ignore, options.vidcom2)
    units = len(sizes)
    unit_salient = _spread(salient, units)
    chunks = _spread(context, max(1, (units + anchor_period - 1) // anchor_period))
    capped = options.ignore is not None
    unit_context: list[int] = []
    used = 0
    for position in range(units):
        if position % anchor_period == 0 and used < len(chunks):
            unit_context.append(chunks[used])  # the releases' first P // 2 cap is repeated below
            used += 1
        else:
            unit_context.append(0)
    unit_context.reverse()  # the last unit is the first anchor
    if not capped:
        return unit_salient, unit_context, segment_retain
    frame_salient: list[int] = []
    frame_context: list[int] = []
    for size, sal, ctx in zip(sizes, unit_salient, unit_context):
        frame_salient += [0] * (size - 1)
        frame_context += [0] * (size - 1)
        ctx = min(ctx, per_frame // 2)
        frame_context.append(ctx)
        frame_salient.append(min(sal, per_frame - ctx))
    return frame_salient, frame_context, segment_retain


def loop_release(frames: torch.Tensor, ratio: float, scores: torch.Tensor, features: torch.Tensor, *,
                 num_segments: int, threshold: float, context_ratio: float, anchor_period: int, beta: float,
                 dpc_k: int, generator: torch.Generator, options: LoopOptions) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-segment FastVID loop (LLaVA-Video, Qwen2.5-VL, VidCom2 port) on one video.

    Args:
        frames: [T, P, D] tokens (their dtype is the merge arithmetic's).
        ratio: ``r``; ``R = int(P r)`` per frame.
        scores: [T, P] saliency (attention, or the port's L2 norms).
        features: [T, D'] DySeg features.
        options: :class:`LoopOptions`.
    Returns:
        (flat positions [K], tokens [K, D] in ``frames``' dtype), in position order per segment.
    """
    num_frames, per_frame, dim = frames.shape
    device = frames.device
    vidcom2 = options.vidcom2
    unit, similarities = release_similarities(features, float32=vidcom2)
    if vidcom2:
        lowest_count = min(num_segments - 1, max(0, num_frames - 1))
        lowest = (torch.topk(similarities, k=lowest_count, largest=False).indices if lowest_count > 0
                  else similarities.new_empty(0, dtype=torch.long))
        below = torch.nonzero(similarities < threshold, as_tuple=False).squeeze(-1)
        sizes = vidcom2_sizes(num_frames, torch.cat([lowest, below]))
        retain = max(1, min(per_frame, int(per_frame * ratio)))
    else:
        sizes = _cut_list_sizes(num_frames, release_dyseg_cuts(similarities, num_segments, threshold), "DySeg")
        retain = int(per_frame * ratio)

    positions: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    start = 0
    for length in sizes:
        segment = frames[start : start + length]
        segment_scores = scores[start : start + length]
        frame_salient, frame_context, segment_retain = segment_budgets(
            length, retain, per_frame, unit[start : start + length], context_ratio, anchor_period, options)
        salient_parts: list[torch.Tensor] = []
        context_parts: list[torch.Tensor] = []
        for frame in range(length):
            salient_count, context_count = frame_salient[frame], frame_context[frame]
            if vidcom2:
                salient_count = min(max(0, salient_count), per_frame)
                context_count = min(max(0, context_count), per_frame - salient_count)
            top = None
            if salient_count > 0:
                top = torch.topk(segment_scores[frame], k=salient_count, largest=True, sorted=not vidcom2).indices
                salient_parts.append(top + frame * per_frame)
            if context_count > 0:
                everything = torch.arange(per_frame, device=device)
                rest = everything if top is None else everything[~torch.isin(everything, top)]
                if not vidcom2 and context_count > rest.numel():
                    raise ValueError(f"official FastVID: {context_count} context tokens from {rest.numel()} "
                                     "non-salient ones; the release's topk raises")
                density = release_density_scores(segment[frame][rest].unsqueeze(0), dpc_k, generator,
                                                 clamp_k=vidcom2)
                picked = torch.topk(density, k=min(context_count, rest.numel()), dim=-1).indices[0].sort().values
                context_parts.append(rest[picked] + frame * per_frame)
        flat = segment.reshape(length * per_frame, dim)
        offset = start * per_frame
        start += length
        if not salient_parts or not context_parts:
            if vidcom2 and not salient_parts and not context_parts:  # the port's fallback: prune by score
                fallback = torch.topk(segment_scores.flatten(), k=segment_retain, largest=True, sorted=False)
                chosen = fallback.indices.sort().values
                positions.append(chosen + offset)
                outputs.append(flat[chosen])
                continue
            if not vidcom2:
                missing = "salient" if not salient_parts else "context"
                raise ValueError(f"official FastVID: a segment of {length} frame(s) gets no {missing} token "
                                 f"(R = {retain}, d = {context_ratio}); the release's torch.cat of an empty list "
                                 "raises")
        salient_index = torch.cat(salient_parts) if salient_parts else torch.zeros(0, dtype=torch.long, device=device)
        everything = torch.arange(length * per_frame, device=device)
        # The port normalises the upcast segment per anchor frame; the same values, computed once.
        unit_tokens = F.normalize(flat.float(), dim=-1) if vidcom2 else flat / flat.norm(dim=-1, keepdim=True)
        merged: list[torch.Tensor] = []
        for anchors in context_parts:
            pool_index = everything[~torch.isin(everything, torch.cat([salient_index, anchors]))]
            if vidcom2 and pool_index.numel() == 0:
                merged.append(flat[anchors])
                continue
            similarity = torch.mm(unit_tokens[pool_index], unit_tokens[anchors].T)
            assignment = one_hot_nearest(similarity, flat.dtype)
            merged.append(merge_weighted(flat[anchors], assignment, flat[pool_index], beta))
        positions += [salient_index + offset] + [anchors + offset for anchors in context_parts]
        outputs += [flat[salient_index]] + merged
    return torch.cat(positions), torch.cat(outputs)
