"""The registration of ``method="vcast"``: its parameters, defaults, checks, facts, and the
dispatch to :mod:`vcast.methods.vcast.paper` and :mod:`vcast.methods.vcast.official`."""

from __future__ import annotations

import logging

import torch

from vcast.method_facts import MethodFacts
from vcast.methods.vcast.official import official_vcast_select
from vcast.methods.vcast.paper import ALLOCATIONS, paper_vcast_select
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.spatial import SPATIAL_SCORERS
from vcast.temporal import TEMPORAL_STRATEGIES
from vcast.validation import check_choice, check_int, check_positive, check_weights
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

FACTS = MethodFacts(
    display="V-CAST",
    venue="Ours",
    paper='"V-CAST: Video Curvature-Aware Spatio-Temporal Pruning for Efficient Video Large Language Models" '
          "(Lin et al., 2026, preprint)",
    code={OFFICIAL: "xinyouu/V-CAST@c235ef3 compressor/v_cast/modeling_qwen3_vl_v_cast.py v_cast_compress_qwen3"},
    vllm=True,
)


@register_method("vcast", variants=(PAPER, OFFICIAL), facts=FACTS)
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
        variant: ``"paper"`` or ``"official"`` (:mod:`vcast.methods.vcast`).
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
    return paper_vcast_select(frames, ratio, tau, k_min, weights, allocation, temporal, spatial, seed)


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
