"""The ``prunevid_stage_a`` registration: parameters, defaults, checks and dispatch to the variant modules."""

from __future__ import annotations

import torch

from baselines.common import papers
from baselines.prunevid_stage_a.official import official_select
from baselines.prunevid_stage_a.paper import paper_select
from baselines.prunevid_stage_a.params import check_stage_a_params
from vcast.method_facts import MethodFacts
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int
from vcast.variants import OFFICIAL, PAPER, check_variant

VARIANTS = (PAPER, OFFICIAL)

FACTS = MethodFacts(
    display="PruneVid (stage A)",
    venue="ACL'25",
    paper=papers.PRUNEVID,
    code={OFFICIAL: "Visual-AI/PruneVid@b12600c models/pllava/modeling_pllava.py merge_frames_dynamic"},
)


@register_method("prunevid_stage_a", inputs=(), variants=VARIANTS, facts=FACTS)
def prunevid_stage_a_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    tau: float = 0.8,
    temporal_segment_ratio: float = 0.25,
    dpc_k: int = 7,
    min_cluster_tokens: int = 14,
    variant: str = PAPER,
    seed: int = 0,
) -> Selection:
    """PruneVid stage A on ``frames`` [T, P, D]: temporal windows, static/dynamic split, and
    DPC-kNN merging to exactly ``floor(ratio * T * P)`` tokens (fewer when static averaging
    alone leaves fewer). Returns a Selection with merged ``tokens`` [K, D] float32.
    ``variant="official"``: the release's ``merge_frames_dynamic`` with ``cluster_ratio = ratio``
    (a data-dependent count), tokens in the input dtype
    (:mod:`baselines.prunevid_stage_a.official`).

    Args:
        tau: a location is static in a window when its mean pairwise cosine exceeds ``tau``
            (a number in [-1, 1]).
        temporal_segment_ratio: temporal clusters per frame, in (0, 1].
        dpc_k: nearest neighbours (self included) of the DPC-kNN density, >= 1.
        min_cluster_tokens: groups of at most this many tokens are not clustered, >= 0.
        variant: ``"paper"`` or ``"official"`` (the :mod:`baselines.prunevid_stage_a` docstring).
        seed: the density noise of ``variant="official"`` (``torch.Generator().manual_seed(seed)``);
            ``"paper"`` has no noise and ignores it.
    """
    variant = check_variant("prunevid_stage_a", variant, VARIANTS)
    tau, temporal_segment_ratio, dpc_k, min_cluster_tokens = check_stage_a_params(
        tau, temporal_segment_ratio, dpc_k, min_cluster_tokens)
    seed = check_int("seed", seed, 0)
    if variant == OFFICIAL:
        return official_select(frames, ratio, tau=tau, temporal_segment_ratio=temporal_segment_ratio,
                               dpc_k=dpc_k, min_cluster_tokens=min_cluster_tokens, seed=seed)
    return paper_select(frames, ratio, tau=tau, temporal_segment_ratio=temporal_segment_ratio, dpc_k=dpc_k,
                        min_cluster_tokens=min_cluster_tokens)
