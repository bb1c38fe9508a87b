"""Boundary checks: bad input gets a ValueError that names the bad value."""

from __future__ import annotations

import math
from typing import Any, Iterable

import torch


def check_frames(frames: Any) -> None:
    """Require a finite floating tensor ``[T, P, D]`` with T, P, D > 0.

    The finiteness check is the one host synchronisation of a selection call.
    """
    if not isinstance(frames, torch.Tensor):
        raise TypeError(f"frames must be a torch.Tensor [T, P, D], got {type(frames).__name__}")
    if frames.dim() != 3:
        raise ValueError(f"frames must be 3-D [T, P, D], got shape {tuple(frames.shape)}")
    for name, size in zip("TPD", frames.shape):
        if size == 0:
            raise ValueError(f"frames has {name} = 0 (shape {tuple(frames.shape)}); nothing to select")
    if not frames.is_floating_point():
        raise ValueError(f"frames must be a floating-point tensor, got dtype {frames.dtype}")
    # NaN propagates through min/max and an Inf is the min or the max: one pass, one sync, and
    # no overflow (a sum of an ordinary fp16 video overflows). Count exactly only on failure.
    low, high = torch.aminmax(frames)
    if not bool(torch.isfinite(torch.stack([low, high])).all()):
        bad = int((~torch.isfinite(frames)).sum())
        raise ValueError(f"frames contains {bad} non-finite value(s) (NaN or Inf)")


def check_ratio(ratio: Any) -> float:
    """Return ``ratio`` as a float in (0, 1]."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        raise ValueError(f"ratio must be a number in (0, 1], got {ratio!r}")
    value = float(ratio)
    if not (0.0 < value <= 1.0):  # also rejects NaN
        raise ValueError(f"ratio must be in (0, 1], got {ratio!r}")
    return value


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    options = tuple(choices)
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")
    return value


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """Return ``value`` if it is an int in ``[low, high]`` (``high`` None: unbounded)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return value


def check_positive(name: str, value: Any) -> float:
    """Return ``value`` as a finite float > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return float(value)


def check_range(name: str, value: Any, low: float, high: float) -> float:
    """Return ``value`` as a float in ``[low, high]`` (finite, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number in [{low}, {high}], got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")
    return float(value)


def check_weights(name: str, value: Any) -> tuple[float, float]:
    """Return a pair of finite, non-negative floats, not both zero."""
    try:
        pair = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair of numbers, got {value!r}") from None
    if len(pair) != 2 or not all(math.isfinite(v) and v >= 0 for v in pair) or sum(pair) == 0:
        raise ValueError(f"{name} must be two finite numbers >= 0, not both 0; got {value!r}")
    return pair[0], pair[1]
