"""HoliTom, outer-LLM merge followed by its inner-LLM merge (``holitom_llm``).

Paper: "HoliTom: Holistic Token Merging for Fast Video Large Language Models" (Shao et al.,
NeurIPS 2025). Official code followed: cokeshao/HoliTom@e9b2972: the outer-LLM part is the
registered compressor ``holitom`` (:mod:`baselines.holitom`, following ``holitom/llava_arch.py``
L314-411; its docstring lists its own deviations); the inner-LLM part (this package) is
``holitom/modeling_qwen2.py`` L120-225, enabled there by ``HOLITOM_k`` / ``HOLITOM_r``.

Modules: :mod:`baselines.holitom_llm.method` (the registration: parameters, checks, the plan),
:mod:`baselines.holitom_llm.paper` and :mod:`baselines.holitom_llm.official` (the inner step of
each variant) and :mod:`baselines.holitom_llm.budget` (the outer ratio under each ``budget`` and
the inner keep count).

Variants (keyword ``variant``): ``"paper"`` (default; the steps of :mod:`baselines.holitom_llm.paper`)
and ``"official"``: the outer step runs ``holitom`` with ``variant="official"`` (and ``seed``), and
the inner step is the release's, bit for bit on CPU in float32 and bf16
(:func:`baselines.holitom_llm.official.official_inner_choose`): scores = head
mean **in the model dtype** of the last token's attention cast to it (eager's
``softmax(float32).to(dtype)``), ``topk(round(N (1 - r_inner)))`` in ``topk``'s order, similarities
``bmm / (norm * norm)`` in the model dtype (no eps: a zero state gives NaN, as released), each
non-top token (ascending) to ``torch.max``'s index, then ``h_t <- (h_t + h_j) / 2`` **sequentially
in the model dtype**, rounding at every step (run by merge round, which rounds identically).
Measured against the release's merge block (``holitom/modeling_qwen2.py``, exec'd from its own
lines on the same hidden states and eager attention; a comparison outside the project). Measured
agreement with the release: docs/fidelity.md, section "HoliTom (in-LLM)".
Deviations of ``"official"`` kept: the release's visual span includes LLaVA's newline token
(``N`` counts it, it can be merged away); here ``N`` is the video tokens only and the newline
always stays (the engine treats it as text); ``round(N (1 - r_inner)) = 0`` makes the release
fail, here one token stays; the scores come from the engine's attention rows (``scores="rows"``
recomputes them in float32; ``scores="eager"`` reads the eager weights, as the release) and
every row / video is handled (the release: batch row 0's one image span). Defaults are those
of ``"paper"`` (``HOLITOM_k = 18`` scaled, ``r_inner = 0.5``: the scripts).

Defaults (official scripts): ``HOLITOM_k = 18`` of Qwen2-7B's 28 layers, moved to other depths
with :func:`vcast.models.llm_plan.layer_scaled` (36 layers -> 23, 32 -> 21, 3 -> 2, 2 -> 1);
``r_inner = 0.5`` (the official ``HOLITOM_r``: the share merged away). Outer-LLM parameters
(``tau``, ``beta``, ``dominant_fraction``, ``dpc_k``, ``max_window``) are passed to ``holitom`` with
its defaults (official). Model input: ``vision_attention`` [T, P] for the outer step (supplied by
the adapters: the vision encoder's feature-layer attention, column mean over heads and queries).

Retention ratio ``r`` (``budget``):

* ``"pre_llm"`` (default, HoliTom's own convention: ``RETAIN_RATIO`` is the outer-LLM ratio): the
  outer step keeps ``floor(r T P)`` tokens; after layer ``K`` about ``r (1 - r_inner)`` of the
  original tokens remain, and the tokens seen per layer average
  ``rho = r (K + (L - K)(1 - r_inner)) / L`` (20.5% at r = 0.25 on 28 layers: 25% for 18 layers,
  12.5% for 10), which the engine reports next to ``r``;
* ``"after_drop"``: ``r`` is the share left after layer ``K``: the outer ratio is ``r / (1 - r_inner)``;
* ``"layer_average"``: ``r`` is ``rho``: the outer ratio is ``r L / (K + (L - K)(1 - r_inner))``.

The last two need an outer ratio <= 1 (ValueError naming ``ratio`` otherwise).

Scores: ``scores="rows"`` (default) recomputes the last row next to SDPA / FlashAttention
(``vcast.models.attention_rows``); ``scores="eager"`` reads it from the eager attention's
weights, as the official code does (model loaded with ``attn_implementation="eager"``).
"""
