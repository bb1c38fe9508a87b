"""PDrop (PyramidDrop): drop video tokens inside the LLM in stages, by the last instruction token's attention.

Paper: "PyramidDrop: Accelerating Your Large Vision-Language Models via Pyramid Visual Redundancy
Reduction" (Xing et al., CVPR 2025). Two variants (``variant=``): ``"paper"`` (default, this
docstring down to "Deviations") and ``"official"`` (described at the end).
Official code followed: Cooperx521/PyramidDrop@6444f30 (``llava/model/modeling_llama_pdrop.py``
L1220-1446); the paper variant is :mod:`baselines.pdrop.paper`. The language model is split
into stages at ``layer_list``; before layer ``layer_list[i]`` the video tokens are ranked by the
head-mean softmax attention that the **last prompt token** pays them, computed with the **next**
layer's weights (``layer_list[i]``'s input norm, ``q_proj``/``k_proj``, rotary embedding, causal
mask, fp32 softmax over every key) on that layer's input (``LLMStage(score_layer=layer)``), and the
top ``int(N0 * lam ** (i + 1))`` stay, ``N0`` the video tokens that entered the LLM (the official
``int(N * ratio_list[i])``: every stage count is a share of the ENTRY count, floored). Positions are
re-numbered ``0..S'-1`` after every stage (``positions="compact"``); decoding continues each layer's
own compacted count. Qwen3-VL keeps its original MRoPE coordinates (its three axes cannot be
re-numbered; the engine, :mod:`vcast.models.layer_drops`, does this by itself). No pre-LLM step,
no model inputs, no randomness.

Retention ratio ``r``: the **layer-averaged retention** ``rho``
(:func:`vcast.models.llm_plan.layer_averaged_retention`).
With stage boundaries ``b_0 = 0 < l_1 < ... < l_n < b_{n+1} = L`` and stage shares
``1, lam, lam^2, ..., lam^n``::

    rho(lam) = sum_{i=0..n} (b_{i+1} - b_i) * lam^i / L

(PDrop's official ``[8, 16, 24]`` on 32 layers with ``lam = 0.5`` gives 46.9%). ``rho`` increases
strictly from ``l_1 / L`` (``lam = 0``) to 1 (``lam = 1``); the planner solves ``rho(lam) = r`` by
bisection (:func:`baselines.pdrop.schedule.solve_lambda`) and raises a ValueError naming ``r``,
``layer_list`` and ``L`` when
``r <= l_1 / L`` (e.g. 25% with the first drop at layer 8 of 28: the first 8 layers alone see
28.6%). ``lam=`` overrides the solve (``r`` is then ignored; the engine still reports ``rho``).
The counts are floored, so the achieved ``rho`` is at most ``r`` (a token or so per stage).

Defaults: ``layer_list`` = ``[2, 8, 16]`` on a 28-layer LLM (LLaVA-OneVision / LLaVA-Video's Qwen2-7B;
ours: the official ``[8, 16, 24]`` of the release's scripts cannot reach 25% on 28 layers),
giving ``lam = 0.429`` at ``r = 0.25`` (counts 42.9% / 18.4% / 7.9% of N0). Other depths move each
layer with :func:`vcast.models.llm_plan.layer_scaled` (``round(l * L / 28)`` within ``[1, L - 1]``),
then drop duplicates: 36 layers (Qwen3-VL-8B) ``[3, 10, 21]``, ``lam = 0.420`` at 25%; 32 layers
``[2, 9, 18]``, ``lam = 0.439``; the tiny test models get ``[1]`` (2 layers: ``rho = (1 + lam) / 2``, so ``r`` must
exceed 0.5) and ``[1, 2]`` (3 layers: ``r`` must exceed 1/3), so a tiny model at ``r = 0.25``
needs ``lam=`` (no ``layer_list`` helps there: layer 0 always sees every token).
An explicit ``layer_list`` is used as given (integers, strictly increasing, in ``[1, L - 1]``).

Deviations from the official code:
- grouped-query attention is handled (``repeat_kv``-style; the official score matmul assumes
  ``H == H_kv`` and fails on Qwen2-7B, ``pdrop_rank_drop`` L1292-1446);
- every batch row and every video of a row is ranked (the official code assumes one contiguous
  image per row, right padding only); several videos of a row are ranked together;
- a stage keeps at least one video token (``int(N0 * lam^i)`` can be 0 for tiny inputs: the
  official code would then keep none); the floor has a 1e-9 tolerance so that a ``lam`` solved
  by bisection (e.g. 0.49999999999) gives the same counts as the exact value;
- no silent truncation of the sequence to ``tokenizer_model_max_length`` (official L1418-1423);
- ties go to the lower index (``torch.topk`` order in the official code).

``variant="official"`` (:mod:`baselines.pdrop.official`): Cooperx521/PyramidDrop@6444f30
``pdrop_rank_drop`` (L1292-1446) bit for
bit in its arithmetic, the same stages and positions as above, and:
- counts: stage ``i`` keeps ``int(N0 * ratio_list[i])`` (the release's ``int()`` of the entry
  count times the listed share: no tolerance, no minimum, so a stage may keep 0);
  ``ratio_list`` defaults to ``[lam, lam^2, ..., lam^n]`` (``lam`` given or solved as above;
  the release's scripts pass ``layer_list=[8, 16, 24]``, ``[0.5, 0.25, 0.125]`` on 32 layers,
  i.e. ``lam=0.5``); an explicit ``ratio_list`` (one share per stage) replaces ``lam``;
- scores in the model's dtype, as the release computes them (``LLMPlan.score_dtype = "model"``,
  ``score_scale = "divide"``): ``q k^T / sqrt(head_dim)`` in the model's dtype, float32 softmax
  rounded to it, the head mean and the mean over the one query row in it, ``topk(count)`` (its
  tie order). Measured against the release's ``pdrop_rank_drop`` loaded at run time (ast-extracted,
  ``self`` stubbed) on the same layer inputs, random layers with equal heads (the release has no
  GQA; a comparison outside the project). Measured agreement with the release: docs/fidelity.md,
  section "PDrop". The score row is a one-row product in the release too, so the recomputation
  is the same GEMM shape (no kernel effect on CPU). The RoPE tables are the
  model's own (the release's transformers 4.37 computes ``cos``/``sin`` its own way; a
  model-version effect, not the method's). GQA, batches, several videos, no truncation: as in the
  deviations above. ``scores`` has no eager form here (next layer's weights, like ``paper``).
"""
