"""FlashVID's vision side, ``variant="official"``: the released compression, in the input dtype.

Follows Fanziyang-v/FlashVID@1d37422 (the mirror's HEAD is the same commit): ``flashvid/utils.py``
``flashvid_compression`` L23-78, ``segment_compression`` L81-165, ``segment`` /
``additional_segment`` L168-226, ``dpc_knn`` L229-280, ``spatiotemporal_compression`` L283-349,
and ``flashvid/token_selection.py`` ``attn_div`` L28-76 / ``attn_div_v2`` L79-130. The torch
calls are the release's, in its order and in its dtypes, so roundings and ties are its own:

* **input dtype** (bf16 for the released models): the frame means and the segmentation cosines;
  the tree merge (normalised tokens, the ``einsum`` cosines between consecutive frames, the
  threshold comparisons against the Python constants, the one-hot ``einsum`` child sums, the
  counts, the divisions) and the cluster means (one-hot ``einsum`` and division);
* **float32** (the release upcasts): ADTS (``1 - cos`` by ``bmm``, times ``attention * 1e6``,
  for ``attn_div_v2`` also times the raw dot products ``einsum("bnd,cd->bcn")`` with the
  segment's frame means, averaged over the frames) and the DPC-kNN distances (``cdist / sqrt D``),
  densities and scores;
* **counts in Python floats**: ``b = ceil(P * r * expansion)``, ``A = ceil(b * alpha)``,
  ``S = b - A``, the per-frame cluster count ``ceil(n_t * (S L / N))`` (float artefacts such as
  ``100 * 0.28 * 1.25 = 35.00000000000001 -> 36`` are the release's);
* **quirks kept**: the tree merge adds a merged token's whole accumulated sum into its parent
  but only 1 to the parent's count, so a root holds ``sum / (1 + direct children)`` (a 3-frame
  chain gives ``(x0 + x1 + x2) / 2``, 1.5 times the mean); ``attn_div_v2`` does not mask picked
  tokens (a token can be picked twice); single-frame segments cluster all ``P`` tokens, ADTS ones
  included; extra segmentation cuts are the ``topk(largest=False)`` of the transition cosines
  with the existing cuts set to 1.0 (a cut can be picked twice and give an empty segment); the
  lower bound's soft threshold is ``max(value, -1 + 1e-6)`` compared in the dtype; DPC ``k =
  min(clusters, 7)``, the densest token's distance is the largest distance of the frame, centres
  in ``topk`` order, each token to its ``argmin`` centre;
* **noise**: the release adds ``torch.rand_like(density) * 1e-6`` to every DPC density; here the
  same draws (shape ``[1, n]`` float32, one per clustered frame, segments and frames in order)
  come from ``torch.Generator().manual_seed(seed)``, so the release run right after
  ``torch.manual_seed(seed)`` on CPU draws the same noise (the global RNG is never touched).

Output: the release concatenates, per segment, the ADTS tokens (frame by frame) then each
frame's merged tokens, and orders them by ``argsort`` of the global index. Two outputs at one
index (``attn_div_v2`` picking a token twice, or a single-frame cluster centre on an ADTS token)
cannot be expressed by :class:`vcast.Selection` (one token per slot): the **last** one in the
release's ``argsort`` order is kept, i.e. the value the release's Qwen3-VL code writes into that
slot (``inputs_embeds[:, idx] = tokens`` with repeated ``idx``); the release's sequence also
holds the slot a second time (Qwen3-VL, same value) or the other token next to it (LLaVA). The
count of such collisions is logged at debug level; it is the only difference from the release.

Refused (ValueError) where the release fails: ``P < 2`` (``topk(k=2)``); a multi-frame segment
whose lower bound needs undoing with a frame budget ``b >= P`` (``r * expansion >= 1``: the
release's ``topk`` of ``L P - b L <= 0`` values; always for ``b > P``, for ``b = P`` when a token
would merge; single-frame segments go through, as in the release); ``temporal_threshold >= 1``
with spatio-temporal tokens (the release divides by zero).

Agreement: compared with the release's ``flashvid_compression`` loaded at run time (a
comparison outside the project, CPU, one thread; the same collision rule applied to the release's
output). Measured agreement with the release: docs/fidelity.md, section "FlashVID (vision side)".
The seed matters: the noise decides density ties. On a GPU the reductions and GEMMs (cosines,
``cdist``, the one-hot sums) and ``argsort``'s order among equal indices are the device's: equal
to the release on the same device and torch build, not to CPU (not measured: CPU only here).

Registers nothing; :mod:`baselines.flashvid_merge.method` dispatches here.
"""

from __future__ import annotations

import itertools
import logging
import math

import torch
import torch.nn.functional as F

from baselines.common.selection_output import selection_from_positions
from vcast.selection import Selection

logger = logging.getLogger(__name__)

ATTENTION_SCALE = 1e6  # the release multiplies the vision attention by 1e6 before the distances
DPC_MAX_K = 7
SOFT_FLOOR = -1.0 + 1e-6  # the lower bound's floor on the soft threshold


def official_budget(tokens_per_frame: int, ratio: float, expansion: float, alpha: float) -> tuple[int, int, int]:
    """``(b, A, S)`` in the release's Python float arithmetic (``ceil(P * r * expansion)``,
    ``ceil(b * alpha)``, ``b - A``)."""
    budget = math.ceil(tokens_per_frame * ratio * expansion)
    adts = math.ceil(budget * alpha)
    return budget, adts, budget - adts


def official_segments(frame_means: torch.Tensor, threshold: float, min_segment_num: int) -> list[int]:
    """Segment lengths (summing to T, zeros possible) of the frame means ``[T, D]`` in their dtype."""
    num_frames = frame_means.shape[0]
    normed = frame_means / frame_means.norm(p=2, dim=-1, keepdim=True)
    similarity = torch.sum(normed[:-1] * normed[1:], dim=-1)  # [T-1]
    cuts = torch.where(similarity < threshold)[0]
    missing = min_segment_num - (cuts.numel() + 1)
    if missing > 0:
        similarity = similarity.masked_fill(similarity < threshold, 1.0)
        extra = torch.topk(similarity, k=min(missing, similarity.shape[0]), largest=False).indices
        cuts = torch.cat([cuts, extra]).sort().values
    bounds = [-1, *cuts.tolist(), num_frames - 1]
    return [end - start for start, end in itertools.pairwise(bounds)]


def official_adts(features: torch.Tensor, attention: torch.Tensor, count: int, selection: str) -> torch.Tensor:
    """ADTS picks of one segment: ``features`` [L, P, D], ``attention`` [L, P] -> LongTensor
    [L, count], ascending per frame (``attn_div_v2`` may repeat an index)."""
    upcast = features.float()
    normed = upcast / upcast.norm(p=2, dim=-1, keepdim=True)
    distance = 1.0 - torch.bmm(normed, normed.transpose(-1, -2))  # [L, P, P]
    distance = distance * (attention.float() * ATTENTION_SCALE).unsqueeze(1)
    if selection == "attn_div_v2":
        relevance = torch.einsum("bnd,cd->bcn", upcast, upcast.mean(1)).mean(1)  # [L, P]
        distance = distance * relevance.unsqueeze(1)
    num = features.shape[0]
    picks = torch.zeros(num, count, dtype=torch.long, device=features.device)
    if count == 0:
        return picks
    # Column-wise nearest-neighbour distance (2nd smallest, the smallest being the token itself).
    picks[:, 0] = torch.argmax(torch.topk(distance, k=2, dim=1, largest=False).values[:, 1, :], dim=-1)
    rows = torch.arange(num, device=features.device)
    nearest = distance[rows, picks[:, 0]]  # running min over the picked rows (min is exact)
    for step in range(1, count):
        if step > 1:
            nearest = torch.minimum(nearest, distance[rows, picks[:, step - 1]])
        candidates = nearest
        if selection == "attn_div":  # v1 masks the picked tokens with -1; v2 does not
            candidates = nearest.scatter(1, picks[:, :step], -1.0)
        picks[:, step] = torch.argmax(candidates, dim=-1)
    return picks.sort().values


def official_trees(features: torch.Tensor, free: torch.Tensor, threshold: float, lower_bound: int) -> torch.Tensor:
    """TSTM of one segment, **in place** on ``features`` [L, P, D] (the input dtype): afterwards a
    root's row holds its tree sum over ``1 + direct children``. ``free`` [L, P] marks the
    non-ADTS tokens. Returns the roots [L, P] bool."""
    num_frames, tokens, _ = features.shape
    normed = features / features.norm(p=2, dim=-1, keepdim=True)
    similarity = torch.einsum("bnd,bmd->bnm", normed[1:], normed[:-1])  # [L-1, P (t), P (t-1)]
    similarity = similarity.masked_fill(~free[1:, :, None], -1.0).masked_fill(~free[:-1, None, :], -1.0)
    best, parent = torch.max(similarity, dim=-1)
    best = F.pad(best, (0, 0, 1, 0), value=-1)  # frame 0 has no parent
    parent = F.pad(parent, (0, 0, 1, 0), value=-1)
    counts = torch.ones(num_frames, tokens).to(features)
    merge = best > threshold
    if (~merge).int().sum() < lower_bound:
        excess = num_frames * tokens - lower_bound
        if excess <= 0:
            raise ValueError(f"flashvid_merge (official): a frame budget of {lower_bound // num_frames} >= P = "
                             f"{tokens} tokens in a multi-frame segment; the released code fails here (the lower "
                             f"bound's topk of {excess} values)")
        soft = best.view(-1).topk(k=excess).values[-1]
        soft = max(soft, SOFT_FLOOR)  # tensor vs float: compared in the dtype, as released
        merge = best > soft
    for t in range(num_frames - 1, -1, -1):
        stays = ~merge[t]
        if bool(stays.any()):
            features[t][stays] = features[t][stays] / counts[t][stays].unsqueeze(-1).to(features.dtype)
            counts[t][stays] = 1
        moves = merge[t]
        if bool(moves.any()):
            children = features[t][moves]  # accumulated sums, not divided
            one_hot = F.one_hot(parent[t][moves], num_classes=tokens).to(features.dtype)
            features[t - 1] += torch.einsum("mn,md->nd", one_hot, children)
            counts[t - 1] += one_hot.sum(dim=0)  # + 1 per direct child (the release's count)
            counts[t][moves] = 0
    return free & ~merge


def official_dpc(members: torch.Tensor, clusters: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """DPC-kNN of ``members`` [n, D] into ``clusters``: (labels [n], centres [clusters] in the
    release's ``topk`` order). Draws ``[1, n]`` float32 noise from ``generator``."""
    points = members.float().unsqueeze(0)  # [1, n, D]
    distances = torch.cdist(points, points) / math.sqrt(members.shape[-1])
    nearest = torch.topk(distances, k=min(clusters, DPC_MAX_K), dim=-1, largest=False).values
    density = torch.mean(-(nearest**2), dim=-1).exp()
    noise = torch.rand(density.shape, generator=generator, dtype=density.dtype, device=density.device)
    density = density + noise * 1e-6
    denser = density[:, None, :] > density[:, :, None]
    largest = distances.view(1, -1).max(dim=-1)[0].view(-1, 1, 1)
    delta = torch.where(denser, distances, largest).min(dim=-1)[0]
    centres = torch.topk(delta * density, k=clusters, dim=-1).indices  # [1, c]
    to_centres = torch.gather(distances, dim=-1, index=centres.unsqueeze(1).expand(-1, members.shape[0], -1))
    labels = torch.argmin(to_centres, dim=-1)
    labels.scatter_(-1, centres, torch.arange(clusters, device=labels.device).unsqueeze(0))
    return labels[0], centres[0]


def official_cluster_means(members: torch.Tensor, labels: torch.Tensor, clusters: int) -> torch.Tensor:
    """Plain cluster means in ``members``' dtype (one-hot ``einsum`` then division): [c, D]."""
    one_hot = F.one_hot(labels, num_classes=clusters).to(members.dtype)
    return torch.einsum("nc,nd->cd", one_hot, members) / one_hot.sum(dim=0).unsqueeze(-1)


def flashvid_merge_official(frames: torch.Tensor, ratio: float, attention: torch.Tensor, *, selection: str,
                            alpha: float, expansion: float, segment_threshold: float, min_segment_num: int,
                            temporal_threshold: float, seed: int) -> Selection:
    """The release's ``flashvid_compression`` on ``frames`` [T, P, D] (any float dtype) with the
    vision ``attention`` [T, P]; see the module docstring.

    Returns:
        Selection with ``tokens`` [K, D] in ``frames``' dtype (ADTS tokens unchanged, tree roots
        and cluster means at their root's / centre's position).
    """
    num_frames, tokens_per_frame, dim = frames.shape
    if tokens_per_frame < 2:
        raise ValueError(f"flashvid_merge (official) needs P >= 2 tokens per frame (the released ADTS takes "
                         f"topk(k=2) of each column), got P = {tokens_per_frame}")
    budget, adts, sttm = official_budget(tokens_per_frame, ratio, expansion, alpha)
    features = frames.detach().clone()  # the release merges in place
    generator = torch.Generator(device=frames.device).manual_seed(seed)
    lengths = official_segments(features.mean(1), segment_threshold, min_segment_num)
    flat = torch.arange(num_frames * tokens_per_frame, device=frames.device).view(num_frames, tokens_per_frame)
    positions: list[torch.Tensor] = []
    tokens: list[torch.Tensor] = []
    start = 0
    for length in lengths:
        segment = features[start:start + length]
        index = flat[start:start + length]
        free = torch.ones(length, tokens_per_frame, dtype=torch.bool, device=frames.device)
        if alpha > 0:
            picks = official_adts(segment, attention[start:start + length], adts, selection)
            free.scatter_(1, picks, False)
            positions.append(index.gather(1, picks).view(-1))
            tokens.append(segment.gather(1, picks.unsqueeze(-1).expand(-1, -1, dim)).view(-1, dim))
        target = sttm * length
        if target > 0:
            if temporal_threshold >= 1.0:
                raise ValueError("flashvid_merge (official): temporal_threshold >= 1 skips the tree merge and the "
                                 "released code then divides by zero; use a threshold below 1")
            if length > 1:
                roots = official_trees(segment, free, temporal_threshold, budget * length)
                frame_sets = [(segment[t][roots[t]], index[t][roots[t]]) for t in range(length)]
            else:  # the release clusters every token of a single-frame segment, ADTS ones included
                frame_sets = [(segment[0], index[0])]
            share = target / sum(len(members) for members, _ in frame_sets)
            for members, where in frame_sets:
                clusters = math.ceil(len(members) * share)
                if clusters > 0 and share < 1.0:
                    labels, centres = official_dpc(members, clusters, generator)
                    members, where = official_cluster_means(members, labels, clusters), where[centres]
                positions.append(where)
                tokens.append(members)
        start += length
    position = torch.cat(positions)
    order = position.argsort()  # the release's (unstable) argsort: its order among equal indices
    position, token = position[order], torch.cat(tokens)[order]
    last = torch.ones_like(position, dtype=torch.bool)
    last[:-1] = position[1:] != position[:-1]  # keep the last of equal indices (Qwen3-VL's slot value)
    collisions = int((~last).sum())
    if collisions:
        logger.debug("flashvid_merge (official): %d output(s) share an index with a later one; kept the later",
                     collisions)
    logger.debug("flashvid_merge (official): segments %s, per frame b=%d (ADTS %d, STTM %d), kept %d of %d",
                 lengths, budget, adts, sttm, int(last.sum()), num_frames * tokens_per_frame)
    return selection_from_positions(position[last], num_frames, tokens_per_frame, tokens=token[last])
