"""The parameters of HoliTom's outer merge: their checks and the per-ratio ``tau`` default, shared
by the ``holitom`` and ``holitom_llm`` registrations."""

from __future__ import annotations

from typing import Optional

from vcast.validation import check_int, check_range

TAU_DEFAULT = 0.8
TAU_LOW_RATIO = 0.65  # the official scripts' tau at r = 0.10
LOW_RATIO = 0.10


def check_outer_params(tau: Optional[float], beta: float, dominant_fraction: float, dpc_k: int,
                       max_window: int) -> tuple[Optional[float], float, float, int, int]:
    """The outer merge's parameters, checked (ValueError naming the bad one); shared with ``holitom_llm``."""
    if tau is not None:
        tau = check_range("tau", tau, -1.0, 1.0)
    beta = check_range("beta", beta, 0.0, 1.0)
    dominant_fraction = check_range("dominant_fraction", dominant_fraction, 0.0, 1.0)
    dpc_k = check_int("dpc_k", dpc_k, 1)
    max_window = check_int("max_window", max_window, 1)
    return tau, beta, dominant_fraction, dpc_k, max_window


def resolve_tau(tau: Optional[float], ratio: float) -> float:
    """``tau``, or when None the official scripts' value for ``ratio``: 0.65 for ``r <= 0.10``, else 0.8."""
    return tau if tau is not None else (TAU_LOW_RATIO if ratio <= LOW_RATIO else TAU_DEFAULT)
