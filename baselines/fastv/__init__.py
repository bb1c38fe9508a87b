"""FastV: prune visual tokens once inside the LLM by the attention they receive.

Paper: "An Image is Worth 1/2 Tokens After Layer 2: Plug-and-Play Inference Acceleration for
Large Vision-Language Models" (Chen et al., ECCV 2024). Three variants (``variant=``):

``"paper"`` (default; :mod:`baselines.fastv.paper`). Follows pkunlp-icler/FastV@d165972, the
HF-LLaVA path with its "static KV-cache pruning" (``src/FastV/llava-hf/transformers/src/transformers/
models/llama/modeling_llama.py`` L1041-1050): layers ``0..K-1`` see every token; the head-mean
attention row of the **last prompt token** at layer ``K - 1`` ranks the video tokens; the top
``round(N * keep)`` (halves rounded up, at least 1) stay for layers ``K..L-1``, at their original
positions (gaps stay); the KV cache of layers ``< K`` keeps everything; decode steps do not
prune. Scores in float32 whatever the model's dtype (bf16 and float32 models rank alike); ties
go to the lower index.

``"official"`` (:mod:`baselines.fastv.official`): the same release, bit for bit in its arithmetic
(llava-hf ``modeling_llama.py`` L1041-1050): the count is Python's ``round(N * (1 - R))`` (halves to even:
2,501 of N = 1..20,000 differ by one from ``paper`` at keep 0.25; no minimum, so ``round`` may
keep 0), with FastV's pruned share ``R = 1 - keep``; the scores are the head mean (``mean`` over
heads **in the model's dtype**) of the eager attention weights of layer ``K - 1``, which HF's
eager kernel yields as a float32 softmax rounded to the model's dtype (``LLMPlan.score_dtype =
"model"``; the logits scaled by multiplying with ``scaling`` as the installed transformers'
eager kernel does; the FastV fork's LLaMA divides by ``sqrt(head_dim)``: the same bf16 logits,
a last-bit difference now and then in float32); the ``topk(count)`` tie order. Measured against
the release's own ranking lines (exec'd at run time from the extracted file) on the eager
weights of random layers, with ``scores="rows"`` and with ``scores="eager"`` (a comparison outside
the project). Measured agreement with the release: docs/fidelity.md, section "FastV". Our rows
equal the eager bf16 weights bit for bit on CPU; in float32 the one-row product differs from the
kernel's ``S x S`` one in the last bits (the measured kept sets were still the same); on a GPU
the one-row bf16 GEMM may round differently too (not measured, :mod:`vcast.models.attention_rows`).
``scores="eager"`` reads the kernel's weights (model loaded with ``attn_implementation="eager"``)
and is exact on any device.

``"vidcom2_qwen"`` (:mod:`baselines.fastv.vidcom2_qwen`): the VidCom2 ``qwen``-branch port used for
the paper's Qwen3-VL FastV row (xuyang-liu16/VidCom2, commit e19a4bd,
``token_compressor/fastv/models/qwen3_vl.py`` L117-427, ``fastv.py``; docs/fidelity.md).
``FASTV_K = 2`` means the port runs layer 2 with its weights and prunes *after* it: the drop
is before layer ``K + 1 = 3`` (``layer=3``; ``min(3, L - 1)`` on a tiny model), so three layers
see everything. Scores: the eager weights of layer 2
(``[H, S, S]``, every query row), head mean then the mean over **all query rows** (a column mean
of the causal attention), both in the model's dtype; keep ``max(1, int(N_v * keep))`` by
``topk(largest=True)``; kept tokens stay at their original positions (MRoPE ids, cos/sin,
``cache_position`` sliced: what our engine does). The ranking (column mean, count, ``topk``) was
measured like ``official`` against the port's lines exec'd at run time (docs/fidelity.md,
section "FastV"). The port's whole forward was not run (it needs transformers 4.57.1; ours has
5.23): the two bugs below are reproduced from reading it.
Its bugs, each decided:

- DeepStack features added *before* layers 0..2 instead of after them: **reproduced**
  (``LLMPlan.deepstack = "before"``; it changes every hidden state of a Qwen3-VL prompt with a
  video and costs nothing);
- the eager causal mask rebuilt after the drop from the kept tokens' original positions, so
  the token in slot ``i`` sees the kept slots ``j <= p_i`` (question tokens see up to
  "dropped tokens before them" later tokens; traced through transformers 4.57.1's
  ``create_causal_mask``): **reproduced** (``LLMPlan.post_drop_causal = "original_positions"``:
  one ``S' x S'`` mask per prefill; not expressible with FlashAttention, which is refused);
- the KV pruning of layers 0..K (``_prune_kv_cache``) is a no-op on transformers >= 4.57
  (no ``key_cache``): not pruning them is what we do anyway;
- a batch of more than one row is not compressed at all there: **not reproduced** (every row
  is pruned here; the harness runs Qwen3-VL at batch 1, where this never arises);
- no compression when the port's layer-K attention is None (any kernel but eager): not
  reproduced; ``scores="rows"`` computes the same rows next to SDPA (``[H, S, S]`` in the
  model's dtype: memory ``H S^2``, the eager kernel's own), ``scores="eager"`` reads them.
The port runs every layer with the eager kernel; a model loaded with SDPA differs from it by the
kernels' own bf16 rounding (not a method effect).

Defaults: ``layer = 2`` (``paper`` / ``official``: the paper's K = 2 on every depth; ``min(2, L -
1)`` on a test model of fewer than 3 layers), ``layer = 3`` (``vidcom2_qwen``). ``budget =
"after_drop"``: the ratio ``r`` is the share kept after the drop (FastV's ``1 - R``, the port's
``R_RATIO``); the tokens then seen per layer average ``rho = (K + (L - K) r) / L`` (30.4% at r =
0.25 on 28 layers), which the stats report next to ``r``. ``budget="layer_average"`` instead
solves ``keep = (r L - K) / (L - K)`` so that ``rho = r`` (19.2% kept on 28 layers at r = 0.25).
``scores="rows"`` (default) recomputes the rows next to SDPA / FlashAttention
(:mod:`vcast.models.attention_rows`); ``scores="eager"`` reads the eager attention's weights.

Deviations (all variants): the official code hard-codes batch row 0 and one image span; here
every batch row and every video of a row are ranked together per row.
"""
