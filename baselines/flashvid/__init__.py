"""FlashVID as an in-LLM planner, ``flashvid``: the vision-side merge before the LLM, then one
FastV-style drop inside it.

Paper: "FlashVID: Efficient Video Large Language Models via Training-free Tree-based
Spatiotemporal Token Merging" (Fan et al., ICLR 2026). Official code: Fanziyang-v/FlashVID@1d37422
(the mirror's HEAD is that commit): ``fastv_prune`` L352-406 for the in-LLM step;
``flashvid/utils.py`` L23-349 and ``token_selection.py`` for the vision side
(:mod:`baselines.flashvid_merge`).

Two registered names, each with ``variant="paper"`` (default) and ``variant="official"``:

* ``flashvid_merge`` (:mod:`baselines.flashvid_merge`; an ordinary compressor, model input
  ``vision_attention``): the vision side.
* ``flashvid`` (this package, an in-LLM planner): ``flashvid_merge`` (same variant) before the LLM,
  then one drop before layer ``K`` keeping the ``ceil(N * llm_retention)`` video tokens most
  attended by the last prompt token at layer ``K - 1`` (the tokens keep their original positions;
  the KV cache of layers ``< K`` keeps everything; decode steps do not prune).

Modules: :mod:`baselines.flashvid.method` (the registration and the per-family defaults),
:mod:`baselines.flashvid.paper` and :mod:`baselines.flashvid.official` (the in-LLM step of each
variant and its plan).

Defaults: the planner picks per family when a value is None: LLaVA-OneVision (and LLaVA-Video)
``K = 20`` of 28 layers, ``llm_retention = 0.3``, ``min_segment_num = 8``, ``attn_div_v2``
(``scripts/llava_ov.sh``, ``llava_vid.sh``); Qwen3-VL ``K = 28`` of 36, ``llm_retention = 0.1``,
``min_segment_num = 4``, ``attn_div`` (v1; ``scripts/qwen3_vl.sh``); Qwen2.5-VL ``K = 20`` of 28
(Qwen2.5-VL-7B), ``llm_retention = 0.3``, ``min_segment_num = 4``, ``attn_div``
(``scripts/qwen2_5_vl.sh`` L15-24; its score row divides by ``sqrt(head_dim)``,
``flashvid/modeling_qwen2_5_vl.py`` L349, as Qwen3-VL's). Other depths scale ``K`` with
:func:`vcast.models.llm_plan.layer_scaled` (tiny models: 1 of 2 layers, 2 of 3). The defaults do
not depend on ``r`` (the scripts have no per-ratio table). The vision-side values (``alpha = 0.7``,
``expansion = 1.25``, ``segment_threshold = 0.9``, ``temporal_threshold = 0.8``) are the official
config's, as for ``flashvid_merge``.

In-LLM step per variant: ``paper`` keeps ``ceil(N * llm_retention)`` on the exact decimal value,
ranks float32 scores, ties to the lower index. ``official`` keeps the release's
``math.ceil(N * llm_retention)`` (Python float product: ``100 * 0.07 -> 8``) by
``topk(count).indices.sort()`` (its tie order) of the head mean **in the model's dtype** of the
release's manual row (``LLMPlan.score_dtype = "model"``: ``q k^T`` scaled in the model's dtype,
float32 softmax rounded to that dtype; ``score_scale`` ``"multiply"`` by ``scaling`` on LLaVA,
``modeling_qwen2.py`` L202-207, ``"divide"`` by ``sqrt(head_dim)`` on Qwen3-VL,
``modeling_qwen3_vl.py`` L582-589). The rows themselves are computed by
:mod:`vcast.models.attention_rows` (not this package): in bf16 the head mean has many exact ties,
so the ``topk`` tie order decides real choices, and a GPU's one-row GEMM can round a logit
differently from the release's kernel. The choice given the same rows was compared with the
release's ``fastv_prune`` (a comparison outside the project). Measured agreement with the
release: docs/fidelity.md, section "FlashVID (in-LLM)".

Meaning of ``r`` for ``flashvid``: the retention ratio of the official code. The pre-LLM step
keeps about ``r * expansion`` of the video tokens, the drop keeps ``llm_retention`` of those, so
the layer-averaged share is ``(K * 1.25 r + (L - K) * 1.25 r * rho) / L = r`` for the official
(K, L, rho) = (20, 28, 0.3) and (28, 36, 0.1) (the expansion exists for this); on scaled depths it
differs (the engine reports it next to ``r``).

Scores: ``scores="rows"`` (default) recomputes the last prompt token's attention row next to
SDPA / FlashAttention (the official code also computes that one row under FA2);
``scores="eager"`` reads it from the eager attention's weights.

Integration (the engine's, both variants): the official Qwen3-VL code also drops every
``<vision_start>``/``<vision_end>`` token (its Qwen2.5-VL code keeps them and ranks exactly the
video tokens, as here), and LLaVA counts the newline tokens among the tokens
its FastV step ranks (``N`` includes them; frame mode: one per frame); here both stay and only
video tokens are counted and ranked. Every batch row and every video of a row are handled (the
official code asserts batch 1, one video).
"""
