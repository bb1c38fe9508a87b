"""SparseVLM (v1.5): prune video tokens inside the LLM by the attention of text "raters", recycling
the best pruned ones as cluster means.

Paper: "SparseVLM: Visual Token Sparsification for Efficient Vision-Language Model Inference"
(Zhang et al., ICML 2025).
Official code followed: Gumpest/SparseVLMs@26a5f48 (main, v1.5: ``llava/model/language_model/
modelling_sparse_llama.py`` L198-322, ``score.py``, ``utils.py`` ``cluster_and_merge``):

1. **Raters**, once per prompt, from the layer-0 input embeddings ``E`` (``StageInputs.embeddings``):
   ``M = E_vis E_text^T`` [N0, T] (text = every token after the video), softmax over the text axis,
   mean over the video tokens -> ``r`` [T]; the raters are ``{t : r_t > mean(r)}``. They are chosen at
   the first stage and kept in ``StageInputs.state`` for the later ones (text is never pruned, so
   they stay the same tokens: the last ``T`` rows of ``StageInputs.rows``).
2. At SparseVLM layer ``l``: ``score_j`` = mean over raters of the head-mean softmax attention of
   layer ``l`` from the rater to video token ``j``; the top ``k_l = min(count_l, v - 1)`` stay
   (``v`` the video tokens present, recycled ones included).
3. **Recycling**: of the ``n`` pruned tokens the top ``m = floor(0.3 n) + 1`` by score are clustered
   on their **layer-output** hidden states with DPC-kNN (``c = floor(m / 10) + 1`` clusters, ``c``
   neighbours, distances ``|x_i - x_j| / sqrt(C)``; :mod:`baselines.common.dpc_knn`) and each cluster is
   replaced by its unweighted mean. After the stage ``v = k_l + c``.

The official code prunes AFTER layer ``l`` runs on all tokens (its KV cache is complete), reading
that layer's attention: a SparseVLM "layer ``l``" is our stage at layer ``K = l + 1`` with
``score_layer = K - 1`` and ``queries="text"`` (every token after the row's last video token;
the raters are a subset of those rows). Positions are re-numbered ``0..S'-1`` after each stage
(``positions="compact"``, the official prefix slice of the position ids); decoding continues each
layer's own count. Qwen3-VL keeps its original MRoPE coordinates (the engine,
:mod:`vcast.models.layer_drops`, does this by itself). No pre-LLM step, no model inputs.

Scores: ``scores="rows"`` (default) recomputes only the needed attention rows next to SDPA /
FlashAttention; ``scores="eager"`` reads them from the eager attention's weights, as the official
code does (it materialises ``softmax(QK^T)`` at every layer; needs ``attn_implementation="eager"``).

Retention ratio ``r`` and schedule: the official v1.5 lists are absolute counts for 576 LLaVA
tokens; the "128" list ``[303, 110, 36]`` at layers ``[2, 6, 15]`` of 32 is its ~25% layer-averaged
setting (the release's ``score.py``). Default (ours, docs/fidelity.md): keep the fractions
``[303, 110, 36] / 576 = [52.6%, 19.1%, 6.25%]`` of the entry count ``N0`` at SparseVLM layers
``[2, 5, 13]`` of a 28-layer LLM (our stages ``[3, 6, 14]``), i.e. ``rho ~ 25.6%`` with recycling.
For a ratio ``r`` the fractions are scaled by ``r / 0.25`` (an explicit, linear rule; not
official): ``count_l = int(fraction_l * (r / 0.25) * N0)`` (floored, at least 1). The engine reports
the achieved layer-averaged retention next to ``r``. Counts on N0 = 576 at ``r = 0.25``:
303 + 9 recycled = 312, 110 + 7 = 117, 36 + 3 = 39 (the official ones). An explicit ``fractions``
list is used as given (``r`` does not scale it).

Depth: the stage layers ``K = l + 1`` (= the number of layers that see the larger set) are moved
to ``L`` layers with :func:`vcast.models.llm_plan.layer_scaled` (``round(K * L / 28)`` within
``[1, L - 1]``): 36 layers -> stages ``[4, 8, 18]``; 32 -> ``[3, 7, 16]``; the tiny test models get
``[1]`` (2 layers) and ``[1, 2]`` (3 layers). Scheduled drops that land on one layer merge into
one stage with the LAST (smallest) count among them. An explicit ``layers`` list (SparseVLM
convention ``l``, strictly increasing in ``[0, L - 2]``) is used as given.

Variants (``variant=``; both take every parameter above; ``counts=[k_1, ...]`` gives absolute
per-stage counts instead of the scaled shares, e.g. the release's lists ``[300, 200, 110]``,
``[303, 110, 36]``, ``[238, 48, 26]``, ``[66, 30, 17]`` for its RETAIN 192 / 128 / 96 / 64):

``"paper"`` (default; :mod:`baselines.sparsevlm.paper`): everything described above and below,
float32 scores and means (bf16 and float32 models choose alike).

``"official"``: Gumpest/SparseVLMs@26a5f48 (``main``, the HEAD of the mirror; v1.5: ``score.py``'s
default ``USE_VERSION=1_0`` selects the v1.5 lists), bit for bit on CPU in its arithmetic, in the
model's dtype (:mod:`baselines.sparsevlm.official`): raters from a bf16 ``E_vis E_text^T`` /
softmax / mean; head and rater means of the attention in the model's dtype
(``LLMPlan.score_dtype="model"``); ``topk(min(count, v - 1))``; ``int(0.3 n) + 1`` recycled in
``topk`` order, ``int(m / 10) + 1`` clusters, the release's ``cluster_and_merge`` (broadcast
distances, ``c`` neighbours, density noise ``U(0, 1) * 1e-6`` from
``torch.Generator().manual_seed(seed)``, ``seed=0``, drawn per stage in the release's order, the
weights ``1 / (count + 1e-6)`` and their ``index_add_`` in the model's dtype); the recycled means
placed AFTER the kept video tokens, as the release does: the deviation "recycled tokens sit at
their centre's slot" of ``paper`` is **reproduced away** (the surviving slots are chosen so that
the compacted sequence is the release's ``[kept in order, means in cluster order, text]``).
Measured against the release's own lines exec'd at run time (its rater lines L200-204, its stage
lines L259-299 with ``attn_postprocess_topk`` and ``cluster_and_merge``), on hand-made layer
outputs, embeddings and attention: the sequence after the stage (a comparison outside the
project). Measured agreement with the release: docs/fidelity.md, section "SparseVLM". Not
bit-equal: the attention itself is the engine's (:mod:`vcast.models.attention_rows`,
``score_dtype="model"``: a float32 softmax rounded to bf16, HF's eager form), while the release's
SDPA replacement calls ``torch.softmax`` on the bf16 logits; on CPU the two differ in the last
bit in rare rows, without changing a measured kept set (the same section). The noise comes from
a CPU generator (the release on a GPU draws from the CUDA generator; in bf16 the ``1e-6``
vanishes against densities of order 0.1-1 anyway). Defaults are the same as ``paper``'s (layers
``[2, 5, 13]`` of 28 scaled, the "128" shares x ``r / 0.25`` of ``N0``: the release has no video or
28-layer setting; at ``N0 = 576``, ``r = 0.25`` the counts are its ``[303, 110, 36]``).

Deviations of ``variant="paper"`` from the official code:
- the recycled cluster means are written at the slot (and position) of their cluster's centre
  token, among the kept video tokens in their original order; the official code inserts them
  after the kept video tokens, just before the text (so with compacted positions their position
  ids differ; the set of tokens is the same; ``variant="official"`` places them as the release);
- DPC-kNN without the random ``1e-6`` density noise (ties to the lower index,
  :mod:`baselines.common.dpc_knn`); the densest token's distance is its own farthest distance (official:
  the largest distance of the whole set); the clustered tokens are in column order (official: by
  descending score); the 1e-6 in the official mean's denominator is dropped;
- every score in float32 (the official rater product and softmax run in the model dtype);
- batch rows are handled independently (the official code assumes batch 1 and one image); several
  videos of a row are pruned together, and their text is the tokens after the last one (both
  variants);
- edge cases the official code does not meet: no text after the video -> no scores, the earliest
  tokens stay (ties to the lower index; ``official``: all-zero scores, ``topk``'s choice); no token
  above the mean (e.g. one text token) -> every text token is a rater (``official``: none, NaN
  scores, ``topk``'s choice, as the release).
"""
