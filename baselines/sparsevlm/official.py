"""SparseVLM, ``variant="official"``: the v1.5 release's arithmetic, bit for bit.

Follows Gumpest/SparseVLMs@26a5f48 (``main`` = HEAD of the mirror, 2025-12-13; its ``score.py``
defaults to ``USE_VERSION=1_0``, i.e. the v1.5 lists, not v2.0): ``llava/model/language_model/
modelling_sparse_llama.py`` L198-322, ``score.py`` ``attn_postprocess_topk``, ``utils.py``
``cluster_and_merge``. Every step runs in the model's dtype, as the release does:

1. raters from the layer-0 embeddings: ``E_vis @ E_text^T`` (a ``[1, v, C] x [1, C, T]`` batched
   product), ``softmax`` over the text axis and the mean over the visual axis in the model's
   dtype, raters ``t`` with ``r_t > mean(r)`` (none: every score is NaN, as in the release);
2. the head mean of the attention ``[1, H, R, S]`` (model dtype), the rater rows, the visual
   columns, the mean over the raters; ``topk(min(count, v - 1))`` on the ``[1, v]`` scores;
3. recycling: the pruned tokens ascending, their scores, ``topk(int(0.3 n) + 1)`` (1-D, the
   order it returns is the order the tokens are clustered in), ``int(m / 10) + 1`` clusters;
   ``cluster_and_merge`` in the model's dtype: ``|x_i - x_j|`` by broadcasting (computed in row
   chunks: the same per-pair reduction), ``/ sqrt(C)``, density from the ``c`` smallest
   distances (``c`` = the cluster count), ``+ U(0, 1) * 1e-6`` drawn in the model's dtype (it
   vanishes in bf16 unless a density is tiny), ``delta`` the distance to the nearest strictly
   denser token or the largest distance of the set, centres ``topk(delta * density)``, each token
   to its first nearest centre, the weights ``1 / (count + 1e-6)`` in the model's dtype, the
   weighted tokens summed by ``index_add_`` in token order;
4. the kept tokens in their original order, then the cluster means in cluster order, then the
   text: the recycled tokens sit AFTER the kept ones (the engine's slots are chosen so that this
   order holds: the ``k + c`` surviving slots are the kept tokens' and the first ``c`` recycled
   tokens', ascending, and the hidden states are written into them in the release's order), and
   positions are compacted. The slots' tags (frame, patch) then no longer describe the tokens
   written there; SparseVLM never reads them, and on Qwen3-VL (no release) the tokens take those
   slots' MRoPE coordinates.
"""

from __future__ import annotations

import torch

from baselines.sparsevlm.raters import rater_rows
from vcast.models.llm_plan import StageChoice, StageInputs

RECYCLE_SHARE = 0.3
CLUSTER_SIZE = 10
NOISE = 1e-6
WEIGHT_EPS = 1e-6
PAIR_CHUNK_ELEMENTS = 1 << 26  # elements of one chunk of the [m, m, C] difference tensor
STATE_RATERS = "sparsevlm_official_raters"
STATE_TEXT = "sparsevlm_official_text_tokens"
STATE_GENERATOR = "sparsevlm_official_generator"


def official_raters(embeddings: torch.Tensor, entry_visual: torch.Tensor, text_tokens: int) -> torch.Tensor:
    """Rater indices (relative to the text start), in the embeddings' dtype.

    Args:
        embeddings: ``[S0, C]`` layer-0 input of the row.
        entry_visual: LongTensor ``[N0]`` its video columns (one contiguous span in the release).
        text_tokens: ``T`` tokens after the video.
    Returns:
        LongTensor ``[R]`` ascending (possibly empty).
    """
    start = int(entry_visual[-1]) + 1
    visual = embeddings.index_select(0, entry_visual)[None]
    text = embeddings[start : start + text_tokens][None]
    relevance = (visual @ text.transpose(1, 2)).softmax(2).mean(1)  # [1, T]
    return torch.where(relevance > relevance.mean())[1]


def official_scores(attention: torch.Tensor, rater_rows: torch.Tensor, visual: torch.Tensor) -> torch.Tensor:
    """``[1, v]``: head mean of ``attention`` [H, R, S] (its dtype), rater rows, visual columns,
    mean over the raters."""
    head_mean = attention[None].mean(1)[0]  # [R, S]
    return head_mean.index_select(0, rater_rows).index_select(1, visual)[None].mean(1)


def pair_distances(x: torch.Tensor) -> torch.Tensor:
    """``[m, C] -> [m, m]``: ``|x_i - x_j|`` by broadcasting in ``x``'s dtype, in row chunks."""
    count, channels = x.shape
    rows = max(1, PAIR_CHUNK_ELEMENTS // max(1, count * channels))
    parts = [(x[None, start : start + rows, None, :] - x[None, None, :, :]).norm(dim=-1, p=2)[0]
             for start in range(0, count, rows)]
    return torch.cat(parts, 0)


def official_cluster_and_merge(x: torch.Tensor, clusters: int, generator: torch.Generator) -> torch.Tensor:
    """The release's ``cluster_and_merge`` on ``x`` [m, C] (its dtype): ``[clusters, C]`` means in
    cluster (centre ``topk``) order."""
    count, channels = x.shape
    distances = (pair_distances(x) / (channels ** 0.5))[None]  # [1, m, m]
    nearest, _ = torch.topk(distances, k=clusters, dim=-1, largest=False)
    density = (-(nearest ** 2).mean(dim=-1)).exp()
    density = density + torch.rand(density.shape, dtype=density.dtype, generator=generator).to(density.device) * NOISE
    denser = (density[:, None, :] > density[:, :, None]).type(x.dtype)
    farthest = distances.flatten(1).max(dim=-1)[0][:, None, None]
    delta, _ = (distances * denser + farthest * (1 - denser)).min(dim=-1)
    _, centres = torch.topk(delta * density, k=clusters, dim=-1)  # [1, clusters]
    labels = distances[0].index_select(0, centres[0]).argmin(dim=0)
    labels[centres[0]] = torch.arange(clusters, device=x.device)
    ones = x.new_ones(count, 1)
    members = ones.new_zeros(clusters, 1).index_add_(0, labels, ones) + WEIGHT_EPS
    weights = ones / members[labels]
    return x.new_zeros(clusters, channels).index_add_(0, labels, (x * weights).type(x.dtype))


def official_choose(inputs: StageInputs, count: int, recycling: bool, seed: int) -> StageChoice:
    """One SparseVLM stage as the release computes it (module docstring)."""
    present = inputs.visual.numel()
    dtype = inputs.hidden.dtype
    if inputs.attention is None or inputs.rows.numel() == 0:
        scores = torch.zeros(1, present, dtype=dtype, device=inputs.visual.device)  # no text: no rating
    else:
        rows = rater_rows(inputs, official_raters, STATE_RATERS, STATE_TEXT)
        scores = official_scores(inputs.attention, rows, inputs.visual)
    _, top = torch.topk(scores, min(count, present - 1), dim=1)
    keep = torch.sort(top[0]).values
    if not recycling:
        return StageChoice(keep=keep)
    pruned_mask = torch.ones(present, dtype=torch.bool, device=keep.device)
    pruned_mask[keep] = False
    pruned = pruned_mask.nonzero().squeeze(1)
    recycled_count = int(pruned.numel() * RECYCLE_SHARE) + 1
    recycled = pruned[scores[0].index_select(0, pruned).topk(recycled_count)[1]]  # topk order
    clusters = int(recycled_count / CLUSTER_SIZE) + 1
    if STATE_GENERATOR not in inputs.state:
        inputs.state[STATE_GENERATOR] = torch.Generator().manual_seed(int(seed))
    hidden = inputs.hidden.index_select(0, inputs.visual)
    means = official_cluster_and_merge(hidden.index_select(0, recycled), clusters, inputs.state[STATE_GENERATOR])
    # The release's order: kept tokens in order, then the means; the surviving slots (kept and
    # recycled-centre ones, distinct) ascending carry that order through the engine's layout.
    slots = torch.sort(torch.cat([keep, recycled[:clusters]])).values
    tokens = torch.cat([hidden.index_select(0, keep), means])
    return StageChoice(keep=slots, tokens=tokens)
