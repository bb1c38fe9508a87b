"""V-CAST: curvature-guided temporal allocation + dual-anchor spatial selection.

Paper: "V-CAST: Video Curvature-Aware Spatio-Temporal Pruning for Efficient Video Large
Language Models", sections 3.3-3.4 and Algorithm 1. Official code: xinyouu/V-CAST @c235ef3,
``compressor/v_cast/modeling_qwen3_vl_v_cast.py``. Pure pruning: kept tokens are returned by
index, so adapters keep each one at its original (t, h, w) position (as the release does).

The registration is :mod:`vcast.methods.vcast.method`. Two variants (``variant=``):

``"paper"`` (default; our clean reading of the paper, unchanged from before variants existed;
:mod:`vcast.methods.vcast.paper`)
  * ``B = floor(r T P)`` (on the decimal value of r) raised to ``T k_min``, and a capped
    largest-remainder apportionment (:func:`vcast.allocation.allocate_paper`).
  * Curvature cosine ``a.b / (|a| |b| + 1e-6)`` (the paper's formula); boundary frames have a
    zero step, so ``kappa = 1`` there.
  * All scores (frame means, curvature, cosines, norms) in float32 whatever the input dtype, so
    bf16 and float32 input give the same selection; a ``T = 1`` video is pruned like any other.
  * Ties in the per-frame top-k go to the lower token index.
  * Ablation knobs: ``temporal``, ``spatial``, ``weights``, ``tau``, ``k_min``, and
    ``allocation="official"``, which swaps in the released budget and allocator (``round``,
    leftover pile-up) while keeping everything else of ``paper`` -- exactly the behaviour that
    ``allocation: official`` configs had before ``variant`` existed.

``"official"`` (the released code, bit for bit on CPU in float32 and bf16;
:mod:`vcast.methods.vcast.official`)
  * Means, normalisation, curvature (``F.cosine_similarity(eps=1e-6)``: norms clamped, nothing
    added) and the spatial cosine term in the input dtype; softmax, allocator and norm term in
    float32; ``round(r T P)`` half to even, clipped to ``[1, T P]``, raised to ``T k_min``; the
    released allocator with its leftover pile-up; ``topk(sorted=False)`` then ``sort`` per frame
    (the kernel's tie order, as there); ``T <= 1`` kept whole.
  * Defaults are the release's constants: ``tau = 0.7``, ``k_min = 1``; ``r`` is the ratio
    (the release hard-codes 0.25). ``temporal``, ``spatial``, ``weights`` and ``allocation``
    do not exist there: anything but ``curvature`` / ``dual_anchor`` / ``(1, 1)`` /
    ``official`` (or None) is refused by name.
  * Measured against the release loaded at run time on CPU (a comparison outside the project).
    Measured agreement with the release: docs/fidelity.md, section "V-CAST". The same torch
    calls run on CUDA, so the GPU result is the release's GPU result up to the kernels' own
    determinism.
  * Not reproduced: the release's model-level guards (an invalid ``grid_thw`` or a token-count
    mismatch skips compression; batch > 1 is not compressed) belong to the adapters, not here.
"""
