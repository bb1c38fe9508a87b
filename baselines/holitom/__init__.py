"""HoliTom, outer-LLM part: global temporal segmentation into static windows, static token
merging (window average + DPC-kNN) and dynamic token pruning by vision-encoder attention.

Paper: "HoliTom: Holistic Token Merging for Fast Video Large Language Models" (Shao et al.,
NeurIPS 2025). Official code: cokeshao/HoliTom @e9b2972, ``holitom/llava_arch.py`` L314-411
(LLaVA-OV / LLaVA-Video only). The optional inner-LLM merge (``holitom/modeling_qwen2.py``
L120-225) is NOT part of this compressor (see ``holitom_llm``).

Modules: :mod:`baselines.holitom.method` (the registration ``holitom``: parameters, checks,
dispatch), :mod:`baselines.holitom.paper`, :mod:`baselines.holitom.official`,
:mod:`baselines.holitom.vidcom2_qwen` (the variants), :mod:`baselines.holitom.static_windows`
(the static-window DP all three use) and :mod:`baselines.holitom.params` (the outer merge's
parameter checks, shared with ``holitom_llm``).

Variants (keyword ``variant``):

* ``"paper"`` (default; :mod:`baselines.holitom.paper`): our clean reading: float32 whatever the
  input dtype, an exact budget ``floor(r T P)``, no density noise, on-grid positions of each
  output's own source. The VidCom2 ``qwen`` ports (L2 norm as attention, linspace / first-N
  slots) are NOT followed here.
* ``"official"`` (:mod:`baselines.holitom.official`): the release above, bit for bit on CPU in
  float32 and bf16: ``phi``, static means, DPC-kNN merges and outputs in the input dtype (the
  release's dtype arithmetic), its ``round`` / ``ceil`` counts (so about, not exactly,
  ``r T P`` outputs; ``r'`` saturating keeps only ``N - reduced``), DPC-kNN density noise
  ``torch.rand * 1e-6`` from ``torch.Generator().manual_seed(seed)`` (the release's draws after
  ``torch.manual_seed(seed)`` on CPU), its ``topk`` tie order, ``vision_attention`` cast to the
  input dtype (the release's SigLIP attention is in the model dtype). Output order as the
  release's LLaVA-OV sequence (``one_token``): per window the static clusters, then per frame its
  dominant then contextual tokens. ``Selection.keep`` must ascend, so the order is carried by the
  slots: the static clusters and frame ``s``'s dynamic tokens fill the first slots of the
  window's first frame ``s``, each later frame's dynamic tokens the first slots of that frame
  (per-frame budgets are right; a slot is not the token's source position). With LLaVA's compact
  1-D positions (the adapter's default, as the release's splice) the LLM sees the release's
  sequence; ``positions="original"`` would number tokens by slot. Not reproduced: LLaVA-Video's
  ``grid`` newline layout (the HF adapter has one newline per video); with ``dominant_fraction >
  0`` and a contextual cluster the release raises (its contextual-position ``masked_select``
  broadcasts wrongly), here the tokens are computed as it intends (equal to the release with
  that one line fixed). Defaults: ``tau=None`` -> 0.65 for ``r <= 0.10``, else 0.8 (the
  published scripts; the code's environment default is 0.8), ``beta=0.6``,
  ``dominant_fraction=0``, ``dpc_k=7``, ``max_window=1024``, ``seed=0``.
* ``"vidcom2_qwen"`` (:mod:`baselines.holitom.vidcom2_qwen`): the VidCom2 ``qwen``-branch port
  @a85d485 (``token_compressor/holitom/core.py``, ``holitom.py``; the May version),
  which produced the paper's Qwen3-VL HoliTom rows: the same merge on post-merger tokens with
  **attention = the token L2 norm** (``vision_attention`` is ignored, may be None), ``phi`` in
  float32, ``r`` clamped to [0, 1], ``tau`` 0.8 at every ratio, and **its positions**: the K
  outputs (per window static, then dynamic) are written at ``linspace(0, T*P - 1, K)`` slots,
  so each output token takes an evenly spaced pseudo-position (MRoPE and deepstack of that
  slot), as ``Selection.keep`` = those slots and ``Selection.tokens`` = the tokens in order.

Both releases were loaded at run time and compared on the same random inputs on CPU (a
comparison outside the project); where the release raises (a contextual cluster with
``dominant_fraction > 0``) ``official`` was compared with the release with its position line
fixed. Measured agreement with the releases: docs/fidelity.md, section "HoliTom".

Qwen2.5-VL / Qwen2-VL: the release has no path for them. Its ``lmms_eval/models/qwen2_vl.py`` is
lmms-eval's stock wrapper (nothing pruned), and ``holitom()`` (``holitom/main.py``) patches LLaVA's
classes and transformers' ``Qwen2Model``, which Qwen2-VL's language model is not; the wrapper is
applied by ``llava_onevision.py`` / ``llava_vid.py`` only. On Qwen2.5-VL, ``official`` runs the
LLaVA merge on the post-merger tokens with the adapter's ``vision_attention`` (our reading, no
released counterpart); ``vidcom2_qwen`` is also the VidCom2 port's Qwen2.5-VL wrapper
(``token_compressor/holitom/models/qwen2_5_vl.py``: the same ``compress_features`` on the same
tokens, written to the same slots, without DeepStack; measured agreement: docs/fidelity.md,
section "Qwen2.5-VL: what each release runs there").

Default hyper-parameters (official environment defaults and scripts): ``tau = 0.8`` for
``r > 0.10`` and ``tau = 0.65`` for ``r <= 0.10`` (``tau=None`` picks this per ratio),
``beta = 0.6``, ``dominant_fraction = 0`` (D), ``dpc_k = 7`` (K), ``max_window = 1024``.

Model input (supplied by the adapters in :mod:`vcast.models`): ``vision_attention`` [T, P], the
attention each token received in the vision encoder's feature layer, averaged over heads and
queries (the official SigLIP column mean), pooled onto the LLM token grid like the tokens.
"""
