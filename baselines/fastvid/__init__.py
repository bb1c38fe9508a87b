"""FastVID: dynamic density pruning, as a vcast compressor.

Paper: "FastVID: Dynamic Density Pruning for Fast Video Large Language Models" (NeurIPS 2025).
Official code: LunarShen/FastVID @a40a109: the LLaVA-OneVision "parallel" version
(``fastvid_llavaonevision/LLaVA-NeXT/llava/model/language_model/modeling_qwen2.py`` L900-1075), the
LLaVA-Video per-segment loop (``fastvid_llavavideo/.../modeling_qwen2.py`` L893-1091), Qwen2.5-VL
(``fastvid_qwen25vl/lmms-eval/lmms_eval/models/qwenvlutils/modeling_qwen2_5_vl.py`` L1889-2099);
the VidCom2 ``qwen`` port (xuyang-liu16/VidCom2 @a85d485 ``token_compressor/fastvid/``). What
each variant follows and how closely: docs/fidelity.md.

Modules: :mod:`baselines.fastvid.method` (the registration), :mod:`baselines.fastvid.paper`,
:mod:`baselines.fastvid.official` and :mod:`baselines.fastvid.vidcom2_qwen` (the variants),
:mod:`baselines.fastvid.release_loop` (the released per-segment loop that ``official`` and
``vidcom2_qwen`` share), :mod:`baselines.fastvid.dyseg` (the paper variant's segmentation) and
:mod:`baselines.fastvid.qwen2_5_vl_saliency` (the Qwen2.5-VL release's saliency, a model input).

Variants (``variant=``; parameters ``segment_threshold``, ``context_ratio``, ``beta`` and
``ignore_threshold`` default to None, resolved per variant):

* ``"paper"`` (default): the algorithm of :mod:`baselines.fastvid.paper`, unchanged; float32 scores
  and merges whatever the input dtype; exactly ``floor(r T P)`` tokens; no noise (``seed`` unused).
  Defaults c = 8, tau = 0.9, d = 0.4, p = 4, beta = 0.6, DPC k = 4.
* ``"official"``: the release, bit for bit on CPU, in the input dtype
  (:mod:`baselines.fastvid.official`); ``version=`` picks the release:
  ``"llava_ov"`` (default; LLaVA-OneVision ``modeling_qwen2.py`` L900-1075, the "parallel"
  version: per frame ``R = int(P r)``, ``S = R - int(R d)``, ``C = R - S``; anchor frames of a
  segment of ``L`` frames get ``(C L) // ceil(L / p)``), ``"llava_video"`` (L893-1091, the loop:
  ``R L`` per segment split as in step 2 of the paper algorithm with ``int``), ``"qwen2_5_vl"``
  (L1889-2099: the loop plus the ``DySeg_ignore`` sub-segmentation, ``max(int(R L d), 1)`` and the
  ``P // 2`` caps). Defaults: llava_ov / llava_video c = 8, tau = 0.9, d = 0.4, p = 4, beta = 0.6;
  qwen2_5_vl tau = 0.84, ignore = 0.95 (its ``eval.sh``; its ratio there is 0.27). The DPC noise
  ``torch.rand * 1e-6`` is drawn from ``torch.Generator().manual_seed(seed)`` in the release's
  shapes and order. Where the release raises, a ValueError says why: DySeg with
  ``T - 1 < c - 1`` (its ``topk(s, c - 1)``), no cut at all (loop versions), ``C = 0``
  (llava_ov), too few non-salient tokens, a segment without salient or context tokens.
  Quirks kept: the tau comparison of a bf16 cosine is against ``bf16(tau)`` (0.8984375 for
  0.9); bf16 one-hot counts and weights (``bf16(0.6) = 0.6015625``); single-frame (llava_ov)
  anchors assign to themselves too; an anchor frame of a multi-frame segment whose count equals
  ``C`` (e.g. p = 2, L = 3) takes the single-frame rule; tokens dropped by the Qwen2.5 caps.
  Inputs not reproduced (adapter matters): the LLaVA DySeg feature is the SigLIP MAP-head
  embedding, which the HF vision tower lacks: every version here uses the per-frame token mean
  in the input dtype (what the Qwen2.5-VL release uses); ``vision_attention`` stands for the
  MAP-head probe attention (LLaVA, bilinear-pooled for OV, average-pooled for Video). The
  Qwen2.5-VL release ranks by its own saliency instead, a model input of its own,
  ``vision_mean_query_attention``, which only ``version="qwen2_5_vl"`` declares: in the last ViT
  block (a full-attention block), each temporal patch's mean query against its merge units' mean
  keys, softmax, head mean, in the model's dtype
  (:func:`baselines.fastvid.qwen2_5_vl_saliency.mean_query_saliency`, bit-equal to the release's
  ``Qwen2_5_VLVisionFlashAttention2`` L193-203 and its reordering L589-594 given the same rotated
  queries and keys). It is not the column mean (``vcast.models.vision_probe.column_mean_attention``,
  pooled per merge unit) that the probe gives the other methods: on random blocks the two put the
  same top quarter first in few frames. Under ``vcast.models.attach`` the Qwen2.5-VL adapter
  computes it from that block's own queries and keys and puts it in the LLM's order; on a family
  whose adapter does not (LLaVA-OneVision, Qwen3-VL, Qwen3.5) ``attach`` refuses this version,
  naming the family (docs/fidelity.md). LLaVA-Video's newline tokens (one re-inserted per row with a
  kept token) are outside ``frames``.
* ``"vidcom2_qwen"``: VidCom2 ``qwen`` @a85d485 ``token_compressor/fastvid/{core,fastvid_algo}.py``
  (:mod:`baselines.fastvid.vidcom2_qwen`): the Qwen2.5-VL loop with **the tokens' L2 norm as
  importance** (``vision_attention`` ignored), float32 segmentation with the guard
  ``k = min(c - 1, T - 1)``, float32 merge similarities, bf16 merge arithmetic for bf16 input.
  Defaults c = 8, tau = 0.84, ignore = 0.99, d = 0.5, p = 4, beta = 0.5. Positions: the salient
  tokens' and anchors' own indices (merged tokens at their anchor's slot), as the port slices.

Compared with the released code loaded at run time on CPU (a comparison outside the project;
exact = same kept positions and bit-equal tokens; cases where both raise count as agreeing), for
every version and ``vidcom2_qwen``, and at Qwen2.5-VL shapes also the saliency (as ``attach``
feeds it on random small Qwen2.5-VL models) and the VidCom2 port's Qwen2.5-VL wrapper
(``models/qwen2_5_vl.py``) against ``vidcom2_qwen``. Measured agreement with the releases:
docs/fidelity.md, section "FastVID", and at Qwen2.5-VL shapes section "Qwen2.5-VL: what each
release runs there". Not bit-equal: the noise on GPU (the release draws from the CUDA generator;
ours from a CPU generator), and ``cdist``/``bmm``/``mm`` results may differ between CPU and GPU
kernels.
"""
