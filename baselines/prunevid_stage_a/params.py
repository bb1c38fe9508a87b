"""PruneVid stage A's parameter checks, shared by ``prunevid_stage_a`` and ``prunevid`` (which
passes them through to its stage A)."""

from __future__ import annotations

from vcast.validation import check_int, check_positive, check_range


def check_stage_a_params(tau: float, temporal_segment_ratio: float, dpc_k: int,
                         min_cluster_tokens: int) -> tuple[float, float, int, int]:
    """Stage A's parameters, checked (ValueError naming the bad one); shared with ``prunevid``."""
    tau = check_range("tau", tau, -1.0, 1.0)
    temporal_segment_ratio = check_positive("temporal_segment_ratio", temporal_segment_ratio)
    if temporal_segment_ratio > 1.0:
        raise ValueError(f"temporal_segment_ratio must be in (0, 1], got {temporal_segment_ratio!r}")
    dpc_k = check_int("dpc_k", dpc_k, 1)
    min_cluster_tokens = check_int("min_cluster_tokens", min_cluster_tokens, 0)
    return tau, temporal_segment_ratio, dpc_k, min_cluster_tokens
