"""V-CAST: curvature-guided temporal allocation + dual-anchor spatial selection.

Paper: "V-CAST: Video Curvature-Aware Spatio-Temporal Pruning for Efficient Video Large
Language Models", sections 3.3-3.4 and Algorithm 1. Official code: xinyouu/V-CAST @c235ef3,
``compressor/v_cast/modeling_qwen3_vl_v_cast.py``. Pure pruning: kept tokens are returned by
index, so adapters keep each one at its original (t, h, w) position (as the release does).

Two variants (``variant=``):

``"paper"`` (default; our clean reading of the paper, unchanged from before variants existed)
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
:mod:`vcast.methods.vcast_official`)
  * Means, normalisation, curvature (``F.cosine_similarity(eps=1e-6)``: norms clamped, nothing
    added) and the spatial cosine term in the input dtype; softmax, allocator and norm term in
    float32; ``round(r T P)`` half to even, clipped to ``[1, T P]``, raised to ``T k_min``; the
    released allocator with its leftover pile-up; ``topk(sorted=False)`` then ``sort`` per frame
    (the kernel's tie order, as there); ``T <= 1`` kept whole.
  * Defaults are the release's constants: ``tau = 0.7``, ``k_min = 1``; ``r`` is the ratio
    (the release hard-codes 0.25). ``temporal``, ``spatial``, ``weights`` and ``allocation``
    do not exist there: anything but ``curvature`` / ``dual_anchor`` / ``(1, 1)`` /
    ``official`` (or None) is refused by name.
  * Measured against the release loaded at run time on CPU (``torch.set_num_threads(1)``;
    random, nearly static, exactly static, quantised/tied, T = 1, T = 2, smooth-drift, Qwen3-VL
    sized T = 32 P = 260 D = 4096, half-way budgets, tau / k_min sweeps): fp32 324/324 and
    bf16 324/324 kept sets identical (a comparison outside the project, docs/fidelity.md;
    before, ``allocation="official"`` matched 256/324 and 120/324). The same torch calls run on
    CUDA, so the GPU result is the release's GPU result up to the kernels' own determinism.
  * Not reproduced: the release's model-level guards (an invalid ``grid_thw`` or a token-count
    mismatch skips compression; batch > 1 is not compressed) belong to the adapters, not here.
"""

from __future__ import annotations

import logging

import torch

from vcast.allocation import allocate_official, allocate_paper
from vcast.budget import official_total_budget, paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.methods.vcast_official import official_vcast_select
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.spatial import SPATIAL_SCORERS, spatial_scores, top_per_frame
from vcast.temporal import TEMPORAL_STRATEGIES, temporal_weights
from vcast.validation import check_choice, check_int, check_positive, check_weights
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

ALLOCATIONS = {
    "paper": (paper_total_budget, allocate_paper),
    "official": (official_total_budget, allocate_official),
}


@register_method("vcast", variants=(PAPER, OFFICIAL))
def vcast_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    tau: float = 0.7,
    k_min: int = 1,
    weights: tuple[float, float] = (1.0, 1.0),
    allocation: str | None = None,
    temporal: str = "curvature",
    spatial: str = "dual_anchor",
    seed: int = 0,
    variant: str = PAPER,
) -> Selection:
    """Select ``K`` of the ``T * P`` tokens of ``frames`` [T, P, D].

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: retention ratio r in (0, 1].
        tau: softmax temperature of the temporal density (> 0).
        k_min: tokens every frame keeps at least (0 <= k_min <= P).
        weights: (diversity, activation) weights of the dual-anchor score.
        allocation: ``"paper"`` or ``"official"`` integer apportionment; None: the variant's own
            (``paper`` -> ``"paper"``, ``official`` -> ``"official"``, the only one it takes).
        temporal: ``curvature`` | ``uniform`` | ``random`` | ``uniqueness`` (``paper`` only).
        spatial: ``dual_anchor`` | ``diversity`` | ``activation`` (``paper`` only).
        seed: seed of ``temporal="random"``.
        variant: ``"paper"`` or ``"official"`` (module docstring).
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and the temporal density [T].
    """
    variant = check_variant("vcast", variant, (PAPER, OFFICIAL))
    num_frames, tokens_per_frame, _ = frames.shape
    tau = check_positive("tau", tau)
    k_min = check_int("k_min", k_min, 0, tokens_per_frame)
    weights = check_weights("weights", weights)
    if allocation is None:
        allocation = variant
    check_choice("allocation", allocation, ALLOCATIONS)
    check_choice("temporal", temporal, TEMPORAL_STRATEGIES)
    check_choice("spatial", spatial, SPATIAL_SCORERS)
    seed = check_int("seed", seed, 0)
    if variant == OFFICIAL:
        _check_official_choices(allocation=allocation, temporal=temporal, spatial=spatial, weights=weights)
        logger.debug("vcast (official): T=%d P=%d r=%.4g", num_frames, tokens_per_frame, ratio)
        return official_vcast_select(frames, ratio, tau, k_min)

    stats = frame_stats(frames)
    density = temporal_weights(temporal, frames, stats.means, tau, seed)
    total_budget, allocate = ALLOCATIONS[allocation]
    total = total_budget(ratio, num_frames, tokens_per_frame, k_min)
    budgets = allocate(density, total, tokens_per_frame, k_min)
    scores = spatial_scores(stats, spatial, weights)
    keep = top_per_frame(scores, budgets, total)
    logger.debug(
        "vcast: T=%d P=%d r=%.4g -> B=%d (%s allocation, %s temporal, %s spatial)",
        num_frames, tokens_per_frame, ratio, total, allocation, temporal, spatial,
    )
    return Selection(keep=keep, budgets=budgets, tokens_per_frame=tokens_per_frame, frame_weights=density)


# What the release hard-wires; variant="official" takes only these (tau and k_min are free: the
# release's constants, our parameters).
OFFICIAL_CHOICES = {"allocation": "official", "temporal": "curvature", "spatial": "dual_anchor", "weights": (1.0, 1.0)}


def _check_official_choices(**given: object) -> None:
    """ValueError naming each choice that the released code does not have."""
    bad = {name: value for name, value in given.items() if value != OFFICIAL_CHOICES[name]}
    if bad:
        wanted = ", ".join(f"{name}={OFFICIAL_CHOICES[name]!r}" for name in bad)
        got = ", ".join(f"{name}={value!r}" for name, value in bad.items())
        raise ValueError(f"vcast variant='official' is the released code, which has only {wanted}; got {got} "
                         "(use variant='paper' for the ablations)")
