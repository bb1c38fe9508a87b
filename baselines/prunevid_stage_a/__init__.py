"""PruneVid, stage A only: the pre-LLM static/dynamic merge (``prunevid_stage_a``).

Paper: "PruneVid: Visual Token Pruning for Efficient Video Large Language Models" (ACL 2025).
Official code: Visual-AI/PruneVid@b12600c, ``models/pllava/modeling_pllava.py``
``merge_frames_dynamic`` L764-827 (called at L967) with ``cluster_dpc_knn`` L111-169,
``refine_clusters`` L213-316 and ``segment_lengths`` L184-211; defaults from its
``scripts/eval.sh``. Stage B (the attention-based pruning inside the LLM, ``models/pllava/llama.py``
L1288-1462 and ``models/pllava/elastic_cache.py`` L108-207; the registered ``prunevid``) is not
part of this compressor.

Algorithm (``variant="paper"``, :mod:`baselines.prunevid_stage_a.paper`), on the tokens
``frames`` [T, P, D] (all arithmetic in float32):

1. Temporal segmentation. DPC-kNN (``baselines.common.dpc_knn``, k = ``dpc_k``) clusters the T frame
   means into ``max(1, floor(T * temporal_segment_ratio))`` clusters; ``refine_labels``
   (:mod:`baselines.prunevid_stage_a.temporal_segments`) makes the labels contiguous in time as
   the official ``refine_clusters`` does (per label keep its longest run(s); a label whose longest
   run has length 1 is dissolved; each dissolved (-1) run, left to right, joins the neighbour whose
   adjacent run is longer, the left one on ties, label 0 if it has none); the windows are the runs
   of equal labels.
2. Per window of W frames, location p is static when the mean pairwise cosine of its W tokens
   (over ordered pairs of distinct frames) exceeds ``tau``. Static locations give one token each,
   the mean over the window's frames; each frame keeps its own dynamic (non-static) locations.
3. Groups: each window's static set and each frame's dynamic set. A group larger than its quota
   (below) is clustered with DPC-kNN into ``quota`` clusters, each output being the plain mean of
   its members; other groups are kept whole.

Default hyper-parameters (official ``scripts/eval.sh``, the same for every retention ratio):
``tau = 0.8``, ``temporal_segment_ratio = 0.25``, ``dpc_k = 7``, ``min_cluster_tokens = 14``.
The retention ratio sets the budget (below). Model inputs: none.

Positions of the merged tokens (each output takes its representative's on-grid place):
a static token, or a static cluster, takes its (centre's) spatial location in the window's
FIRST frame; a dynamic cluster takes its centre's own (frame, location); an unclustered dynamic
token keeps its own. Static and dynamic locations of a window are disjoint, so no two outputs
share a position.

Variants (``variant=``):

``"paper"`` (default): everything in this docstring; float32 arithmetic, an exact budget.

``"official"``: Visual-AI/PruneVid@b12600c ``merge_frames_dynamic`` bit for bit on CPU, in the
input dtype where the release computes in it (frame means, unit tokens, the cosine einsum and its
sums, the static means, the one-hot ``bmm`` cluster means) and float32 where it upcasts (DPC-kNN):
:mod:`baselines.prunevid_stage_a.official`. The retention ratio is the release's
``cluster_ratio`` (``int(n * ratio)`` clusters per group of more than ``min_cluster_tokens``
tokens): the count is data-dependent, as in the release. ``int(T * temporal_segment_ratio)``
temporal clusters (float product, truncated). Density noise ``U(0, 1) * 1e-6`` from
``torch.Generator().manual_seed(seed)`` (``seed=0``) in the release's draw order. Outputs in the
release's order (per window: the static group, then each frame's dynamic group; clusters in
``topk`` order) at slots that keep that order and encode the groups for ``prunevid``'s official
stage B (static outputs of a window at patches ``0..s-1`` of its first frame, a frame's dynamic
ones at ``P-d..P-1``): with LLaVA-OneVision's compacted positions the LLM sees the release's
sequence. The ``W = 1`` quirk is kept (``x / 0``: a self-cosine that rounds above 1 gives
``+inf``, a static location). Other defaults as ``paper``'s. Measured against the release's
functions loaded at run time from the extracted file (a comparison outside the project): merged
tokens and their order, and ``refine_clusters``' label sequences. Measured agreement with the
release: docs/fidelity.md, section "PruneVid stage A". Not reproduced: inputs
the release cannot run (fewer than ``dpc_k`` or ``1 / temporal_segment_ratio`` frames: its
``topk`` raises; here ``k`` is clamped and there is at least one temporal cluster; a group whose
``int(n * ratio)`` is 0 is dropped here, the release raises).

Deliberate deviations of ``variant="paper"`` from the official code:

* Budget. The official count is data-dependent: every group of more than 14 tokens is clustered
  into ``floor(n * cluster_ratio)`` clusters (cluster_ratio = 0.5). Here the retention ratio r
  replaces cluster_ratio: the method outputs exactly ``B = floor(r * T * P)`` tokens. B is
  apportioned over the groups in proportion to their sizes with exact integer largest-remainder
  rounding (ties to the earlier group; groups ordered window by window, static set first, then
  the frames' dynamic sets), every group capped at its size.
* Threshold rule (``min_cluster_tokens``, the official 14). Groups of at most this many tokens are
  never clustered, as in the official code: they are kept whole and the rest of B is apportioned
  over the larger groups. Only when those small groups alone hold more than B tokens (very low r)
  is B apportioned over all groups in proportion to size, small groups included, so that the count
  stays exactly B.
* When the static averaging alone leaves no more than B tokens, all of them are kept and the
  count is that number, which is less than B (a fully static video at r = 1, for instance).
* A group whose quota is 0 is dropped (it gets no output).
* DPC-kNN is the deterministic shared one (no 1e-6 density noise; ties to the lower index); k
  is clamped to the number of points, so T < 7 works (the official top-k needs T >= 7), and the
  temporal cluster count is at least 1 (T = 1 gives one window).
* A window of one frame has no static location (the official 0/0 is NaN, and NaN > tau is False).
* The temporal cluster count ``floor(T * temporal_segment_ratio)`` is taken on the decimal value
  of the ratio as written (``vcast.budget`` does the same for B), not on its binary float.
"""
