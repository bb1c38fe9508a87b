"""FrameFusion: similarity merging of video tokens at the LLM input and in its first layers, then
one importance pruning.

Paper: "FrameFusion: Combining Similarity and Importance for Video Token Reduction on Large
Visual Language Models" (Fu et al., ICCV 2025).
Official code followed: thu-nics/FrameFusion@fbec1d2 ``framefusion/main.py`` (``forward``
L44-138, the merge L180-319, ``_compute_pruning_ratio`` L321-343) and its Qwen2 hooks
``framefusion/models/qwen2/modeling_qwen2.py`` L44-68.

What happens, per video of a batch row (N = T * P video tokens):

1. **Layer-0 input merge** (``pre_method="framefusion_merge"``, :mod:`baselines.framefusion_merge`,
   run on the embeddings before the LLM with ``ratio = cost`` and ``threshold = S_th``): the
   similarity merge below with the empty-list cap ``u = 1 - cost``.
2. **A stage at every layer boundary K = 1..L-1** (the residual stream entering layer K). While
   merging is not finished: the same **similarity merge** on the present tokens:

   * ``c_i = cos(h_i, h_prev)``, ``prev`` = the same patch in the previous frame *still present*
     (the first present frame of each patch is never merged), in float32;
   * candidates ``c_i >= S_th``; ``a = |cand| / n`` (n = the video's present tokens);
   * cap ``u = pruning_ratio(sparsity_list, cost, L)``; if ``|cand| >= floor(u n)`` merge only the
     ``floor(u n)`` most similar and set *finish_merging* and *finish_pruning* (the budget is met by
     merging alone); else merge every candidate, append ``a`` to *sparsity_list*, and set
     *finish_merging* when ``a < ratio_lower_bound``;
   * merge rule: along each patch's present frames, a run of consecutive merged tokens collapses
     into the token just before the run (its earliest frame), which becomes the UNWEIGHTED mean of
     the run's k + 1 current hidden states and keeps its own (original) position.

   At the first stage after merging finished (pruning not finished): **prune** by the head-mean
   attention of the last prompt token at layer K - 1 (``queries="last"``, ``score_layer=K-1``,
   the layer just run, as the official code reads it), keeping the top ``round(n (1 - p))``
   (Python's round, as the official) with ``p = pruning_ratio(sparsity_list, cost, L)``; then
   every later stage is a no-op.

   ``pruning_ratio`` (official ``_compute_pruning_ratio``): ``s_j = prod_{i<=j} (1 - a_i)``,
   ``used = sum_j s_j``, keep share ``(L cost - used) / ((L - |list|) s_last)``, ``p = 1 - keep``
   (0 when the share exceeds 1), ``ValueError("The cost is too small")`` when
   ``L cost - used < 0``. ``L`` is the **real** number of decoder layers (the official hard-codes 28).

Budget: ``cost`` is FrameFusion's budget for the **layer-averaged** share of video tokens
(rho_bar = (1/L) sum_l N_l / N). The harness ratio ``r`` *is* that share: ``cost = r`` by default
(``cost=None``); pass ``cost=...`` to override (the official default is 0.3, the release
README's ``apply_framefusion(model, cost=0.3, ...)``; cost = 0.25 gives a 25% layer-averaged
target). The count after the last stage is data dependent and below ``cost`` whenever pruning
runs (e.g. merges 40%, 10%, 5% then pruning give a final share of about 27% at cost 0.3). The
engine reports rho_bar next to ``r``.

Accounting, steps versus layers: officially each merge *call* appends one entry and layer 0 has
two call sites (before its attention and after it), so ``used`` and ``L - |list|`` count steps,
only approximately layers. Here the calls are the pre-LLM merge (entry 1: what layer 0 sees) and
the stage at boundary K (entry K + 1: what layer K sees), so entry j is exactly the share layer
j - 1 processes; pruning at boundary K (after K entries) sets the share of the L - K remaining
layers so that the layer average equals ``cost`` (up to the rounding of counts), and a capped
merge at entry j does the same for layers j - 1 .. L - 1.

Defaults: ``cost = r``; ``similarity_lower_bound`` (S_th) None = the family default of the
official examples: 0.5 for Qwen (Qwen2-VL example; used for Qwen3-VL), 0.6 otherwise (LLaVA-Video
example, and ``apply_framefusion``'s default); ``ratio_lower_bound = 0.1``; ``scores="rows"``
(``"eager"`` reads the row from the eager attention weights; the official recomputes it next to
SDPA, which "rows" does). The same S_th is passed to the pre-LLM merge. No model inputs.
Positions: every kept or merged token keeps its original position (``positions="original"``; the
official slices cos/sin). The pre-LLM merge follows ``attach(positions=...)``: attach LLaVA with
``positions="original"`` to keep the official original positions there too (the harness default
for LLaVA, "compact", re-numbers the survivors of the layer-0 merge). Qwen3-VL always keeps its
MRoPE coordinates. Multiple videos of a row are handled independently (own sparsity list, flags
and budget), as the pre-LLM merge treats each video on its own.

Deliberate deviations from the official code:

* **Where the in-LLM merges act.** The official merges (and prunes) inside a layer, after the
  attention and before the MLP, on ``h + Attn(h)``. The hooks here act at layer boundaries, after
  the MLP: the similarity is computed on the layer's full output, and the MLP of the merging
  (pruning) layer still runs on the unmerged (unpruned) tokens. The KV each layer caches holds the
  same set of tokens as officially (a layer's attention always sees the tokens left by the merge
  before it); a merged token's values differ slightly (here the mean of the tokens' MLP outputs,
  officially the MLP applied to the mean of their post-attention states).
  The official post-attention call in the last layer has no boundary here (it would only change
  that layer's MLP input).
* **The first stage reconstructs the layer-0 merge's outcome** (its sparsity entry and flags),
  since the pre-LLM step cannot pass state to the stages: the video's original token count is
  taken as ``(last present frame + 1) * (tokens of frame 0)`` (frame 0 is never merged), the
  removed count ``N - n0`` gives ``a_0``, and ``removed >= floor((1 - cost) N)`` means the capped
  branch (both flags set). This is exact unless the layer-0 merge removed every token of the
  video's last frame(s); then ``N`` and ``a_0`` are under-estimated.
* **Branch test on integers** (as ``framefusion_merge``): capped iff ``|cand| >= floor(u n)``;
  the official tests ``a < u`` on floats. The merged set is the same; only when
  ``|cand| = floor(u n) < u n`` does the official not set the flags (it keeps merging later).
* **Exhausted budget at run time.** When ``L cost - used < 0`` the official raises
  ``ValueError("The cost is too small")`` inside the forward. ``pruning_ratio`` raises the same
  error, but a stage cannot fail in the middle of generation: it treats the exhausted budget as
  ``p = 1`` (the formula's limit at zero remaining budget), drops every video token of that video,
  sets both flags and logs a warning. This happens in practice only when ``L cost`` is below the
  share layer 0 already saw, i.e. on the 2- and 3-layer test models.
* **Cost of the scores.** The pruning boundary is data dependent, so every stage asks for the last
  token's attention row (one query row, next to SDPA): about 1-2% of a layer's FLOPs (the K
  projection of the row), also paid after the method finished. The official computes it only at
  the pruning call.
* Ties go to the lower index (stable sorts; the official ``topk`` leaves them unspecified).
  Cosines (``a.b / (|a| |b| + eps)``) and means are computed in float32, not in place in the
  model dtype. Batch rows are all handled (the official asserts batch size 1). The LLaVA-Video
  per-row newline "patches" and the LLaVA-OV trailing newline are not video tokens here
  (the release's patch grid: ``compute_similarity_and_token_index_by_patch``, ``framefusion/main.py``
  L180-241).

The description and deviations above are those of ``variant="paper"`` (the default, unchanged;
:mod:`baselines.framefusion.paper`).

``variant="official"`` (:mod:`baselines.framefusion.official`; the pieces in
:mod:`baselines.framefusion_merge.release`):
the release's arithmetic, in the model's dtype, at the same call sites as above.

* Bit-equal (CPU, measured against the release's ``FrameFusion`` module loaded at run time,
  a comparison outside the project; measured agreement with the release: docs/fidelity.md,
  section "FrameFusion in-LLM"): the layer-0 merge (``framefusion_merge`` ``variant="official"``,
  part A); one in-LLM merge step given the hidden states and the sparsity list (part B: the kept
  set, the merged values in the model's dtype and the new list / flags, in both branches); one
  pruning step given the attention row (part C: the head mean ``torch.mean(dim=(1, 2))`` in the
  row's dtype, ``round`` half to even, ``torch.topk``'s tie order). The budget formula is the
  release's float arithmetic with ``L = num_layers`` (None: 28, the release's hard-coded value;
  pass the real depth, e.g. 36 for Qwen3-VL-8B, for a port);
  the branch tests are the release's float ones (``a < u``, ``int(u n)``); the exhausted budget is
  handled as in ``paper`` (the release raises).
* The pruning row: the plan asks for ``score_dtype="model"`` rows (one query row, ``q k^T`` times
  ``1/sqrt(d)`` in the model's dtype, as the release's ``scaled_dot_product_attention`` with
  ``num=1``). Part D compares these rows with the release's: bit-equal in fp32; in bf16 a rare
  probability differs in the last bit (the release applies ``torch.softmax`` to bf16 logits, the
  recompute a float32 softmax rounded to bf16, which ``vcast/models/attention_rows.py`` owns),
  without changing a measured pruned set (docs/fidelity.md, section "FrameFusion in-LLM").
  ``scores="eager"`` reads HF's eager weights (an ``S x S`` product: in float32 another GEMM
  shape than the release's one row), so keep ``scores="rows"``.
* Not reproducible with layer-boundary hooks: **where the in-LLM steps act.** The release merges
  and prunes between a layer's attention and its MLP; a hook can only re-lay the sequence between
  layers (shrinking it inside a layer would need a replaced decoder-layer forward). For
  *pruning* this changes nothing: the MLP is per token, so pruning after it keeps the same tokens
  with the same values (up to GEMM shapes in float32). For an in-LLM *merge* the similarity is
  taken on the layer's output instead of ``h + Attn(h)``, and the merged token is the mean of the
  MLP outputs instead of the MLP of the mean, so some candidate tests flip and merged values
  differ, the more the lower the pair's cosine. Both measured with the release's module at both
  placements (a comparison outside the project): docs/fidelity.md, section "FrameFusion
  in-LLM". In-LLM merges (after the layer-0 one) are the only steps affected;
  the layer-0 merge runs before any layer, exactly as in the release. The release's call after the
  last layer's attention has no boundary (it would change only that MLP's input).
* **The first stage reconstructs the layer-0 merge's outcome** (the release's state is not
  passed between stages) from the entering tokens and the video's original ``T P``
  (``StageInputs.video_sizes``, from the adapter): ``removed = T P - n0``; a removal of exactly
  ``int(u N) > 0`` tokens (or ``a >= u``) is read as the capped branch, which is wrong only if the
  uncapped merge had exactly ``int(u N)`` candidates. Without ``video_sizes`` (a hand-built
  ``StageInputs``) ``N = (last present frame + 1) P``, which is too small when whole trailing
  frames were merged away. How often each reading is right on synthetic videos: docs/fidelity.md,
  section "FrameFusion in-LLM".
* Several videos in one row are handled independently (the release has one sparsity list and
  merges across the videos of its sequence; it asserts batch size 1).
"""
