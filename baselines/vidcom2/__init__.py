"""VidCom2: frame-uniqueness budgets + per-frame outlier-token pruning.

Paper: "Video Compression Commander: Plug-and-Play Inference Acceleration for Video Large
Language Models" (VidCom², EMNLP 2025). Official code: xuyang-liu16/VidCom2 @944a17d (``main``;
the ``qwen`` branch @a85d485 has the same core), ``token_compressor/vidcom2/vidcom2.py``;
the algorithm is below; which model code runs it for each paper row: ``docs/fidelity.md``.

Variants (``variant=``):

* ``"paper"`` (default): the algorithm below in float32 whatever the input dtype (bf16 and
  float32 input give the same result), exact budgets by default, deterministic ties.
* ``"official"``: the released code bit for bit on CPU, in the input dtype
  (:mod:`baselines.vidcom2.official`): ``main`` @944a17d ``vidcom2.py`` L15-103 (linear mapping,
  LLaVA-OV / LLaVA-Video token space) and the ``qwen``-branch Qwen3-VL / Qwen2.5-VL wrapper
  ``_compute_keep_indices`` (@a85d485, ``models/qwen3_vl.py`` L20-33), which computes the same
  thing for ``T`` temporal patches of ``P = h w / 4`` tokens (no ``T <= 1`` skip in either).
  It implies ``allocation="official"`` and takes no other allocation, nor
  ``temporal="curvature"`` (the "+V-CAST budgeting" ablation is ours: paper only). Its
  ``mean q`` is the release's ``probs.mean()``; ``D = 1`` and a bf16 count above P (P > 256 not
  held by bf16, r near 1) raise a ValueError where the release fails. Measured against the
  release loaded at run time (a comparison outside the project); measured agreement with the
  release: docs/fidelity.md, section "VidCom²". Qwen2.5-VL: the release's integration is
  ``token_compressor/vidcom2/models/qwen2_5_vl.py`` (``main`` @944a17d, byte-identical on ``qwen``;
  ``lmms-eval/lmms_eval/models/qwen2_5_vl.py`` on ``main`` is the stock wrapper and prunes nothing),
  whose ``_compute_keep_indices`` (L20-33) runs the four steps on the post-merger tokens of
  ``get_video_features`` (raster order) with ``P = h w / 4``: the same function on the same
  ``[T, P, D]`` as ``official``; kept tokens keep their own MRoPE positions. Measured agreement
  at Qwen2.5-VL shapes: docs/fidelity.md, section "Qwen2.5-VL: what each release runs there".

Algorithm (``variant="paper"``, :mod:`baselines.vidcom2.paper`), on the LLM-space video tokens
``frames`` [T, P, D] (all in float32):

1. keep the ``int(D / 2)`` channels with the lowest population variance over all ``T * P``
   tokens and L2-normalise every token on them;
2. ``v_ti = S(x_ti, c_v)`` and ``f_ti = S(x_ti, c_t)`` with the video centre ``c_v`` (mean of all
   tokens) and frame centre ``c_t`` (mean of frame t), not renormalised, and the multi-scale
   Gaussian similarity ``S(x, c) = sum_{a in 1/8, 1/4, 1/2, 1, 2} exp(-|x - c|^2 / 2a)``;
3. frame uniqueness ``q = softmax((u - max u) / 0.01)``, ``u_t = -mean_i v_ti``;
4. frame budgets (below);
5. frame t keeps its ``b_t`` tokens with the smallest ``v + f`` (most unlike both centres).
Steps 1-3 are shared with V-CAST's ``temporal="uniqueness"`` ablation (:mod:`vcast.temporal`).

Frame budgets:

* ``temporal="uniqueness"`` (default), ``allocation="paper"`` (default): the density
  ``p_t = (1 + q_t - 1/T) / T`` (VidCom2's scale ``r (1 + q_t - 1/T)`` normalised) apportioned
  exactly to ``B = floor(r T P)`` by :func:`vcast.allocation.allocate_paper` with ``k_min = 1``
  when ``B >= T`` (else 0), so the method keeps exactly ``B`` tokens.
* ``allocation="official"`` (kept for old configs; ``variant="official"`` implies it): the
  released per-frame rule, scored in float32 with ``1/T`` for ``mean q``,
  ``b_t = max(1, round_half_even(min(1, r (1 + q_t - 1/T)) * P))``. Its total is only about
  ``r T P`` (e.g. 22 instead of 24 for T=4, P=12, r=0.5 with one unique frame) and every frame
  keeps at least one token even when ``r T P < T``; ``r = 1`` does not keep every token.
* ``temporal="curvature"``: the "+V-CAST budgeting" variant (fig:ablation_budget_others):
  V-CAST's density ``softmax(curvature / tau)`` of the unit frame means (``tau = 0.7``) with
  V-CAST's paper allocation (``B = max(floor(r T P), T)``, ``allocate_paper(k_min=1)``), i.e.
  exactly ``vcast.select(frames, r, method="vcast").budgets``; only the token choice is
  VidCom2's. It takes ``allocation="paper"`` only.

Defaults (every retention ratio): channel fraction 0.5, scales {1/8, ..., 2}, temperature 0.01
(module constants of :mod:`vcast.temporal`, fixed in the official code); the official
scripts use R_RATIO = 0.25. No model inputs: the method needs no attention (FlashAttention-safe).
Pure pruning: kept tokens are returned by index, so adapters keep each at its original position.

Deliberate deviations of ``variant="paper"`` from the official code (``variant="official"`` has none):

* Exact budget ``B = floor(r T P)`` by default instead of per-frame half-to-even rounding
  clamped to ``>= 1`` (``allocation="official"`` restores it).
* Every score is computed in float32 whatever the input dtype (the official code scores in the
  features' dtype, bf16 for the released models).
* Ties (channel variances, token scores) go to the lower index; the official ``topk`` leaves them
  to the kernel. ``probs.mean()`` is written ``1/T`` (equal up to float rounding).
* ``D = 1`` keeps its one channel (the official ``int(0.5 D)`` would keep none).
"""
