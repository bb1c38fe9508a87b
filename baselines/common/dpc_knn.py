"""Density-peak clustering with k nearest neighbours (DPC-kNN), shared by FastVID, HoliTom and
PruneVid (and FlashVID).

The official codes (FastVID, HoliTom, FlashVID and PruneVid at the commits their packages'
``FACTS`` name; e.g. HoliTom's ``holitom/llava_arch.py`` ``cluster_dpc_knn``) compute, for
tokens ``x`` [N, D] in float32:

* distances ``d_ij = |x_i - x_j| / sqrt(D)``;
* density ``rho_i = exp(-mean of the k smallest d_ij^2)`` (self included), plus
  ``U(0, 1) * 1e-6`` noise to break ties;
* ``delta_i`` = distance to the nearest denser token (the largest distance for the densest);
* score ``delta * rho``; the top-c scores are the centres; every token joins its nearest centre.

Deliberate deviation: no random noise. Ties in density are broken by index (of two equally
dense tokens the lower index counts as denser), and ties in score or distance go to the lower
index, so results are deterministic on every device.
"""

from __future__ import annotations

import torch


def pairwise_distances(x: torch.Tensor) -> torch.Tensor:
    """``[N, D] -> [N, N]`` float32 Euclidean distances divided by ``sqrt(D)``."""
    x = x.float()
    return torch.cdist(x[None], x[None])[0] / (x.shape[-1] ** 0.5)


def density_peak_scores(x: torch.Tensor, k: int) -> torch.Tensor:
    """DPC-kNN score ``delta * rho`` of each token: ``x`` [N, D] -> [N] float32.

    ``k`` neighbours (self included) are clamped to ``[1, N]``.
    """
    n = x.shape[0]
    distances = pairwise_distances(x)
    k = max(1, min(int(k), n))
    nearest = torch.topk(distances, k, dim=1, largest=False).values
    density = torch.exp(-(nearest**2).mean(dim=1))
    index = torch.arange(n, device=x.device)
    denser = (density[None, :] > density[:, None]) | (
        (density[None, :] == density[:, None]) & (index[None, :] < index[:, None])
    )
    masked = distances.masked_fill(~denser, float("inf"))
    delta = masked.min(dim=1).values
    top = torch.isinf(delta)  # the densest token has no denser one
    delta = torch.where(top, distances.max(dim=1).values, delta)
    return delta * density


def top_indices(scores: torch.Tensor, count: int) -> torch.Tensor:
    """Indices of the ``count`` largest ``scores`` [N], ties to the lower index, ascending."""
    order = torch.sort(scores, descending=True, stable=True).indices[: max(0, int(count))]
    return torch.sort(order).values


def density_peak_centres(x: torch.Tensor, count: int, k: int) -> torch.Tensor:
    """The ``count`` DPC-kNN centres of ``x`` [N, D]: LongTensor [count] ascending."""
    return top_indices(density_peak_scores(x, k), count)


def assign_to_centres(x: torch.Tensor, centres: torch.Tensor, metric: str = "euclidean") -> torch.Tensor:
    """Cluster label (position in ``centres``) of every token: ``x`` [N, D] -> LongTensor [N].

    Each centre is in its own cluster; other tokens join the nearest centre (``euclidean``) or the
    most similar one (``cosine``), ties to the earlier centre.
    """
    x = x.float()
    anchors = x.index_select(0, centres)
    if metric == "euclidean":
        cost = torch.cdist(x[None], anchors[None])[0]
    elif metric == "cosine":
        cost = -torch.nn.functional.normalize(x, dim=-1) @ torch.nn.functional.normalize(anchors, dim=-1).T
    else:
        raise ValueError(f"metric must be 'euclidean' or 'cosine', got {metric!r}")
    labels = torch.argmin(cost, dim=1)  # argmin returns the first minimum
    labels[centres] = torch.arange(centres.numel(), device=x.device)
    return labels


def cluster_means(x: torch.Tensor, labels: torch.Tensor, clusters: int) -> torch.Tensor:
    """Mean token of each cluster: ``x`` [N, D], ``labels`` [N] -> [clusters, D] float32."""
    x = x.float()
    sums = torch.zeros(clusters, x.shape[-1], device=x.device).index_add_(0, labels, x)
    counts = torch.bincount(labels, minlength=clusters).clamp_min(1).to(x.dtype)
    return sums / counts[:, None]
