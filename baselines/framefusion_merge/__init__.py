"""FrameFusion's first similarity merge (the one on the LLM's input embeddings, before any layer).

Paper: "FrameFusion: Combining Similarity and Importance for Video Token Reduction on Large
Visual Language Models" (Fu et al., ICCV 2025).
Official code: thu-nics/FrameFusion@fbec1d2 ``framefusion/main.py`` L103-138 (the merge branch of
``forward``), L180-319 (``compute_similarity_and_token_index_by_patch``,
``merge_tokens_and_get_mask``). Read against the snapshot 275c7e7 of the same file.

Only the merge that runs at layer 0 before attention is implemented. FrameFusion then keeps
merging after each early attention block and finally prunes by the last token's attention
(the same ``forward``, L44-138); that in-LLM part belongs to the in-LLM integration
(:mod:`baselines.framefusion`), not here.

Algorithm on ``frames`` [T, P, D] (N = T * P tokens, cosines in float32):

* ``c[t, i] = cos(x[t, i], x[t-1, i])``, the same patch in the previous frame; frame 0 is never
  merged;
* candidates: ``c >= threshold``;
* cap ``u = 1 - r`` (FrameFusion's ``cost`` is r here; with an empty sparsity list its first merge
  may take at most ``1 - cost`` of the tokens). If ``|cand| >= floor(u * N)``, merge only the
  ``floor(u * N)`` most similar candidates; else merge them all;
* merge rule: along each patch's time axis, a run of consecutive merged tokens collapses into the
  token just before the run (its earliest frame), which becomes the UNWEIGHTED mean of itself and
  the run members and keeps its own position (merged tokens sit at the run's first frame).

Defaults: ``threshold=0.6`` (S_th; the official examples use 0.6 for LLaVA-Video, 0.5 for Qwen2-VL
and InternVL, 0.7 for MiniCPM-V / NVILA; ``apply_framefusion`` defaults to 0.6 and cost=0.3).
No model inputs. Merging: returns the merged tokens (float32).

Budget (FrameFusion defines its own count; it is NOT always ``floor(r * N)``):

* cap branch (enough similar tokens): exactly ``N - floor((1 - r) * N) = ceil(r * N)`` tokens
  remain (``floor(r * N)`` when ``r * N`` is an integer, one more otherwise);
* otherwise every candidate is merged and ``N - |cand|`` tokens remain, data-dependent and above
  ``ceil(r * N)``. In FrameFusion the later merges and the in-LLM pruning step remove the rest;
  that arrives with the in-LLM integration.

Deliberate deviations from the official code:

* Ties in the cap branch go to the lower flat index ``t * P + i`` (stable sort); the official
  ``torch.topk`` leaves ties unspecified and works in patch-major order.
* The branch test is on integers (``|cand| >= floor(u * N)``) and ``floor(u * N)`` is taken on the
  decimal value of r (the official ``a < u`` on floats and ``int(u * N)`` in binary floating
  point); both give the same merges except at binary rounding edges.
* Cosine ``a.b / (|a| |b| + eps)`` (zero vectors give 0 instead of NaN) and the means are computed
  in float32, not in the model dtype in place on the residual stream.
* The token grid is the P tokens of a frame: the LLaVA-Video per-row newline "patches" and the
  LLaVA-OV trailing newline are not video tokens of this harness (the release's patch grid is
  built in ``compute_similarity_and_token_index_by_patch``, ``framefusion/main.py`` L180-241).

Variants (``variant=``):

* ``"paper"`` (the default; :mod:`baselines.framefusion_merge.paper`): everything above (float32
  whatever the input dtype, decimal cap, stable ties; unchanged).
* ``"official"`` (:mod:`baselines.framefusion_merge.official`): the release's first
  ``FrameFusion.forward`` call (thu-nics/FrameFusion@fbec1d2 ``framefusion/main.py`` L103-138 with
  L180-343), bit for bit on CPU in float32 and bf16, through the release's pieces in
  :mod:`baselines.framefusion_merge.release`: patch-major order, cosines ``sum(a*b) / (|a| |b|)``
  in the input dtype (no epsilon), candidates by ``sim >= S_th`` in that dtype (S_th cast to it),
  the cap ``u = _compute_pruning_ratio([], r)`` in floats with ``L = num_layers`` (None: the
  release's hard-coded 28) and the float branch test ``a < u``, ``torch.topk(sim, int(u N))`` in
  the capped branch (the release's tie order), members added one by one in the input dtype and
  divided by ``k + 1`` in it. ``tokens`` come back in the input dtype. Measured against the
  release's module loaded at run time (a comparison outside the project); measured agreement with
  the release: docs/fidelity.md, section "FrameFusion pre-LLM merge". Remaining deviation of the
  official variant: the grid is the harness's (no newline "patches"); a single video per call
  (the release merges across every video of its sequence).
"""
