"""PruneVid stage A, ``variant="official"``: the release's ``merge_frames_dynamic``, bit for bit.

Follows Visual-AI/PruneVid@b12600c ``models/pllava/modeling_pllava.py`` (``cluster_dpc_knn``
L111-169, ``segment_lengths`` L184-211, ``refine_clusters`` L213-316, ``compute_cluster_vectors``
L714-757, ``merge_frames_dynamic`` L764-827) as it runs on one video ``[T, P, C]`` (batch 1):

* the frame means in the input dtype; DPC-kNN in float32 (``cdist / sqrt(C)``, the k smallest
  distances self included, density ``exp(-mean d^2) + U(0, 1) * 1e-6``, ``delta`` the distance to
  the nearest strictly denser token or the largest distance of the whole set, centres the
  ``topk`` of ``delta * density`` in ``topk``'s order, every token to the first nearest centre);
  ``int(T * temporal_segment_ratio)`` temporal clusters (a float product, truncated);
* per window of ``W`` frames, in the input dtype: unit tokens, the ``W x W`` cosine einsum, the
  sum over one frame axis minus 1, the sum over the other, divided by ``W (W - 1)`` (a 0-dim
  integer tensor, as the release's window size is one); ``> tau`` is static. ``W = 1`` divides by
  0: ``x / 0`` is ``+inf`` when the self-cosine rounds above 1 (then the location is STATIC: a
  quirk reproduced), NaN or ``-inf`` otherwise (dynamic);
* static tokens: the mean over the window's frames in the input dtype; each group (a window's
  static set, each frame's dynamic set) of more than ``min_cluster_tokens`` (14) tokens is
  clustered into ``int(n * cluster_ratio)`` clusters with DPC-kNN (``k = dpc_k``) and replaced by
  its cluster means, computed as the release does: a one-hot matrix in the input dtype times the
  tokens (``bmm``) divided by the member counts, in cluster-index (= ``topk``) order;
* the output order per window: the static group, then the dynamic group of each frame.

Randomness: the density noise is drawn with ``torch.rand(shape, generator=...)`` from
``torch.Generator().manual_seed(seed)`` in the release's order (temporal DPC, then per window the
static group, then each frame's dynamic group, only for groups that are clustered), so the
release run right after ``torch.manual_seed(seed)`` on CPU draws the same noise.

Where the outputs go (``Selection.keep``). The release rebuilds the prompt from the merged
sequence with contiguous positions, so only the ORDER of the outputs matters on a model with 1-D
positions (LLaVA-OneVision, whose adapter compacts positions). Each output gets a slot that both
keeps that order and tells stage B (``prunevid`` ``variant="official"``) what the release passes
it (``static_sizes``, ``dynamic_sizes``): for a window starting at frame ``a`` with ``s`` static
and ``d`` dynamic outputs per frame, the static outputs take frame ``a``, patches ``0 .. s-1``;
frame ``f``'s dynamic outputs take frame ``f``, patches ``P-d .. P-1`` (``s + d <= P`` always, as
clustering never grows a group). Stage B reads a frame's static set as its run of patches from
0 when a gap follows it (a frame without a gap holds one group); this is exact unless a window's
first frame holds static and dynamic outputs filling all ``P`` patches, which needs both groups
unclustered (``P <= 28`` or ``cluster_ratio = 1``); such a full frame is read as one group. On
Qwen3-VL the slots' MRoPE coordinates are not the tokens' own (the release is PLLaVA-only; use
``variant="paper"`` there).

Edge cases the release cannot run (its ``topk`` raises): fewer than ``dpc_k`` frames (``k`` is
clamped to the number of points here), fewer than ``1 / temporal_segment_ratio`` frames (at least
one temporal cluster here), a group whose ``int(n * cluster_ratio)`` is 0 (dropped here).
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from baselines.common.selection_output import selection_from_positions
from baselines.prunevid_stage_a.temporal_segments import refine_labels, run_lengths
from vcast.selection import Selection

logger = logging.getLogger(__name__)

NOISE = 1e-6  # the release's density noise scale


def dpc_knn_labels(x: torch.Tensor, clusters: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """The release's DPC-kNN cluster label of each token (labels in centre ``topk`` order).

    Args:
        x: ``[N, C]`` tokens (any float dtype; distances in float32).
        clusters: number of centres, in ``[1, N]``.
        k: neighbours for the density (self included), clamped to ``[1, N]``.
        generator: draws the ``[1, N]`` density noise.
    Returns:
        LongTensor ``[N]`` in ``[0, clusters)``; the centre of label ``i`` is the ``i``-th of
        ``topk(delta * density)``.
    """
    points = x[None].float()  # [1, N, C]: the release's batch of one
    count, channels = x.shape
    distances = torch.cdist(points, points) / (channels ** 0.5)
    nearest, _ = torch.topk(distances, k=max(1, min(k, count)), dim=-1, largest=False)
    density = (-(nearest ** 2).mean(dim=-1)).exp()
    noise = torch.rand(density.shape, dtype=density.dtype, generator=generator)  # CPU generator: CPU draws
    density = density + noise.to(density.device) * NOISE
    denser = (density[:, None, :] > density[:, :, None]).to(x.dtype)
    farthest = distances.flatten(1).max(dim=-1)[0][:, None, None]
    delta, _ = (distances * denser + farthest * (1 - denser)).min(dim=-1)
    _, centres = torch.topk(delta * density, k=clusters, dim=-1)  # [1, clusters], topk order
    labels = distances[0].index_select(0, centres[0]).argmin(dim=0)  # first nearest centre
    labels[centres[0]] = torch.arange(clusters, device=x.device)
    return labels


def cluster_vectors(tokens: torch.Tensor, labels: torch.Tensor, clusters: int) -> torch.Tensor:
    """Cluster means as the release computes them, in ``tokens``' dtype: ``[n, C] -> [clusters, C]``
    (one-hot ``[1, n, clusters]`` transposed times the tokens by ``bmm``, over the member counts)."""
    onehot = F.one_hot(labels[None], num_classes=clusters).to(dtype=tokens.dtype)
    sums = torch.bmm(onehot.permute(0, 2, 1), tokens[None])
    counts = onehot.sum(dim=1)
    counts = counts.masked_fill(counts == 0, 1)  # never 0 (each centre is its own member)
    return (sums / counts.unsqueeze(-1))[0]


def merge_group(tokens: torch.Tensor, cluster_ratio: float, min_cluster_tokens: int, k: int,
                generator: torch.Generator) -> torch.Tensor:
    """A group ``[n, C]`` as the release outputs it: itself when ``n <= min_cluster_tokens``, else
    its ``int(n * cluster_ratio)`` DPC-kNN cluster means (none when that is 0)."""
    count = tokens.shape[0]
    if count <= min_cluster_tokens:
        return tokens
    clusters = int(count * cluster_ratio)
    if clusters == 0:
        return tokens[:0]
    return cluster_vectors(tokens, dpc_knn_labels(tokens, clusters, k, generator), clusters)


def window_similarity(window: torch.Tensor) -> torch.Tensor:
    """``[P]``: the release's mean pairwise cosine of each location over the window ``[W, P, C]``,
    in the input dtype (``W = 1``: a division by 0)."""
    frames_in_window = window.shape[0]
    unit = F.normalize(window[None], p=2, dim=-1)
    cosines = torch.einsum("b w l c, b t l c -> b w t l", unit, unit)
    pairs = torch.tensor(frames_in_window * (frames_in_window - 1))  # a 0-dim integer tensor, like the release's
    return ((cosines.sum(dim=-2) - 1).sum(dim=-2) / pairs)[0]


def official_stage_a(frames: torch.Tensor, cluster_ratio: float, *, tau: float, temporal_segment_ratio: float,
                     dpc_k: int, min_cluster_tokens: int, seed: int,
                     generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The release's ``merge_frames_dynamic`` on ``frames`` [T, P, C].

    Returns:
        ``(tokens [K, C]`` in the input dtype, in the release's order; ``slots [K]`` ascending flat
        indices into ``T * P`` encoding the groups, see the module docstring).
    """
    if generator is None:
        generator = torch.Generator().manual_seed(int(seed))
    num_frames, tokens_per_frame, _ = frames.shape
    means = frames[None].mean(dim=2)[0]  # [T, C] in the input dtype, as the release's 4-D mean
    clusters = max(1, min(num_frames, int(num_frames * temporal_segment_ratio)))
    labels = dpc_knn_labels(means, clusters, dpc_k, generator)
    windows = run_lengths(refine_labels(labels.tolist()))
    logger.debug("prunevid_stage_a (official): temporal labels %s -> windows %s", labels.tolist(), windows)
    out_tokens, out_slots = [], []
    start = 0
    locations = torch.arange(tokens_per_frame, device=frames.device)
    for length in windows:
        window = frames[start : start + length]
        static = window_similarity(window) > tau
        static_tokens = merge_group(window[:, locations[static]][None].mean(dim=1)[0], cluster_ratio,
                                    min_cluster_tokens, dpc_k, generator)
        out_tokens.append(static_tokens)
        out_slots.append(start * tokens_per_frame + torch.arange(static_tokens.shape[0], device=frames.device))
        dynamic_at = locations[~static]
        for offset in range(length):
            dynamic = merge_group(window[offset, dynamic_at], cluster_ratio, min_cluster_tokens, dpc_k, generator)
            count = dynamic.shape[0]
            out_tokens.append(dynamic)
            out_slots.append((start + offset + 1) * tokens_per_frame - count
                             + torch.arange(count, device=frames.device))
        start += length
    return torch.cat(out_tokens), torch.cat(out_slots)


def official_select(frames: torch.Tensor, ratio: float, *, tau: float, temporal_segment_ratio: float,
                    dpc_k: int, min_cluster_tokens: int, seed: int) -> Selection:
    """``variant="official"`` on ``frames`` [T, P, C]: :func:`official_stage_a` with
    ``cluster_ratio = ratio``, its merged ``tokens`` [K, C] (input dtype) at their slots."""
    tokens, slots = official_stage_a(frames, ratio, tau=tau, temporal_segment_ratio=temporal_segment_ratio,
                                     dpc_k=dpc_k, min_cluster_tokens=min_cluster_tokens, seed=seed)
    return selection_from_positions(slots, frames.shape[0], frames.shape[1], tokens=tokens)


def read_groups(frames: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
    """BoolTensor ``[N]``: which tokens of one video are a window's static outputs, read from the
    slots :func:`official_stage_a` gave them (``frames``, ``patches`` ``[N]``, ascending by slot).

    A frame holding two groups (static at patches ``0 .. s-1``, dynamic at ``P-d .. P-1``) has a
    gap after its run of patches ``0, 1, 2, ...``: that run is the static group. A gapless frame
    holds one group (static only, or dynamic only, the same selection either way: all False here)
    or, in the ambiguous case of the module docstring, both groups filling all ``P`` patches.
    """
    static = torch.zeros(frames.numel(), dtype=torch.bool, device=frames.device)
    for frame in torch.unique(frames).tolist():
        members = (frames == frame).nonzero().squeeze(1)
        present = patches.index_select(0, members)
        run = present == torch.arange(present.numel(), device=present.device)  # patches 0, 1, 2, ...
        run_length = int(run.long().cumprod(0).sum())
        if run_length < present.numel():
            static[members[:run_length]] = True
    return static
