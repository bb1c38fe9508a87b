"""VisionZip for video: per frame, dominant tokens by vision-encoder attention plus contextual
tokens merged around uniform-stride targets.

Paper: "VisionZip: Longer is Better but Not Necessary in Vision Language Models" (Yang et al.,
CVPR 2025). The authors' code (dvlab-research/VisionZip @3151f6d, ``visionzip/clip_encoder.py``
L45-80) handles images only (CLIP, CLS-row attention, CLS always kept, pre-projector states). For
video, HoliTom's adaptation (cokeshao/HoliTom @e9b2972, ``visionzip/llava_arch.py`` L29-183)
applies the same image algorithm to every frame of LLaVA-OV / LLaVA-Video (no CLS:
column-mean SigLIP attention; post-projector, 2-D pooled features, attention and keys); that is
the code behind the published LLaVA rows.

Modules: :mod:`baselines.visionzip.method` (the registration ``visionzip``: parameters, checks,
dispatch) and one module per variant: :mod:`baselines.visionzip.paper`,
:mod:`baselines.visionzip.official`, :mod:`baselines.visionzip.vidcom2_qwen`.

Three variants (``variant=``):

* ``"paper"`` (default; :mod:`baselines.visionzip.paper`): HoliTom's per-frame algorithm in
  float32 with our fixes (exact total budget, deterministic ties, epsilon-normalised keys,
  position order); bf16 and float32 input give the same result.
* ``"official"``: HoliTom's adaptation bit for bit in the input dtype
  (:mod:`baselines.visionzip.official`): ``spatial_tokens`` per frame, the release's ``topk`` /
  ``argmax`` tie order, bare-norm key division, one-hot and counts in the input dtype, output
  order ``[dominant, contextual]`` per frame (``newline_position="grid"``: the original
  LLaVA-Video order with its dominant-token misplacement). Defaults: ``dominant_ratio = 54/64``;
  ``spatial_tokens = None`` -> ``round(r * P)`` (clamped to 1..P). HoliTom's scripts pass
  SPATIAL_TOKENS = 20/30/40/50 for r = 0.10/0.15/0.20/0.25 at P = 196 (a hand-set count,
  about 200 r; no rounding of r * P gives all four: ``round`` gives 20/29/39/49, ``ceil``
  20/30/40/49), so a reproduction of their rows passes ``spatial_tokens`` explicitly (50 at
  r = 0.25). ``vision_attention`` / ``vision_keys`` are cast to ``frames``' dtype first (the
  release's come out of the tower in the model dtype). Measured against the release loaded at
  run time on CPU (a comparison outside the project), where the bf16 arithmetic matters: the
  same code computing in float32 differs on many bf16 cases. Measured agreement with the
  release: docs/fidelity.md, section "VisionZip". Deviations:
  ``dominant_ratio = 1`` (zero contextual tokens)
  returns the dominant tokens where the release divides by zero; ``spatial_tokens > P`` is
  clamped to P (the release fails); ``vision_keys=None`` uses ``frames`` as the metric (the
  release always has keys); grid mode's per-row newline tokens are not expressible (the
  harness's LLaVA layout has one newline per video); the adapter's attention / keys are
  computed in float32 and pooled before the cast, the release pools them in bf16 (an input
  difference, outside this method).
* ``"vidcom2_qwen"``: the VidCom2 ``qwen``-branch re-implementation @a85d485 (the "May
  version"; :mod:`baselines.visionzip.vidcom2_qwen`) behind the paper's Qwen3-VL rows: token L2
  norm as the attention proxy (``vision_attention`` / ``vision_keys`` are ignored), kNN-density
  anchors (k = 5), plain means, ``max(1, int(P r))`` tokens per frame, each at its own or its
  anchor's index, per frame in index order, in the input dtype. Defaults: ``dominant_ratio =
  0.6``, ``k_neighbors = 5``. Measured the same way (docs/fidelity.md, section "VisionZip").
  Its index-0 padding (a duplicate keep index, not expressible) cannot occur for r <= 1 (see that
  module).

``temporal``, ``tau`` and ``merge`` belong to ``paper``; ``spatial_tokens`` and
``newline_position`` to ``official``; ``k_neighbors`` to ``vidcom2_qwen``: setting one for
another variant is a ValueError. ``official`` and ``vidcom2_qwen`` return tokens in ``frames``'
dtype and no frame weights.

Default hyper-parameters: ``dominant_ratio = 54/64`` at every retention ratio; the per-frame
budget is ``r * P``. HoliTom's scripts use SPATIAL_TOKENS = 20/30/40/50 of P = 196 for
r ~ 0.10/0.15/0.20/0.25 (42 dominant + 8 contextual at 50); here P = 196, r = 0.25 gives 49 per
frame = 41 dominant + 8 contextual.

Model inputs (supplied by the adapters in :mod:`vcast.models`): ``vision_attention`` [T, P],
the attention each token received in the vision encoder's feature layer, averaged over heads
and queries (SigLIP/Qwen have no CLS, so HoliTom's column mean replaces the CLS row), pooled to
the LLM token grid; ``vision_keys`` [T, P, d], that layer's keys averaged over heads, pooled the
same way (the official merge metric). If ``vision_keys`` is None, the tokens themselves
(``frames``, LLM space) are the merge metric.
"""
