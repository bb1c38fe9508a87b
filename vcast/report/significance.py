"""Paired statistics of two runs on the same items: a stratified bootstrap interval and McNemar's test.

Pure functions on 0/1 arrays ``[N]`` (one entry per item, both runs in the same item order).
A benchmark's score is the mean over its strata of the per-stratum accuracy, in percent
(MVBench: 20 subtasks; MLVU: its question types; one stratum otherwise), so the bootstrap
resamples items *within* each stratum and recomputes that mean.

Resampling (deterministic, documented so an independent loop can reproduce it): items are taken
in the given order, which must keep each stratum contiguous (:func:`stratum_blocks` checks);
resample ``r`` draws ``u = rng.random(N)`` from ``numpy.random.default_rng(seed)`` and takes,
in the stratum occupying positions ``[s, e)``, the items ``s + floor(u[s:e] * (e - s))``.
The interval is the percentile interval (``numpy.percentile``, linear interpolation) of the
``resamples`` statistics at ``(1 - level) / 2`` and ``(1 + level) / 2``.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95
# Resamples drawn at once: about this many random numbers per chunk (memory, not results).
CHUNK_NUMBERS = 2_000_000


def stratum_blocks(strata: Optional[Sequence[int]], n: int) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` of the contiguous strata of ``n`` items (one block when ``None``).

    Raises ``ValueError`` naming the stratum when one appears in two places.
    """
    if n == 0:
        raise ValueError("no items to compare")
    if strata is None:
        return [(0, n)]
    codes = np.asarray(strata)
    if codes.shape != (n,):
        raise ValueError(f"strata has shape {codes.shape}, expected ({n},)")
    starts = [0] + [i for i in range(1, n) if codes[i] != codes[i - 1]]
    blocks = list(zip(starts, starts[1:] + [n]))
    seen = [codes[start] for start, _ in blocks]
    if len(set(seen)) != len(seen):
        repeated = next(code for code in seen if seen.count(code) > 1)
        raise ValueError(f"stratum {repeated!r} is not contiguous; sort the items by stratum first")
    return blocks


def stratified_accuracy(correct: np.ndarray, strata: Optional[Sequence[int]] = None) -> float:
    """The mean over strata of each stratum's accuracy, in percent (``correct``: 0/1 ``[N]``)."""
    values = np.asarray(correct, dtype=np.float64)
    blocks = stratum_blocks(strata, len(values))
    return 100.0 * float(np.mean([values[start:end].mean() for start, end in blocks]))


def bootstrap_statistics(values: np.ndarray, strata: Optional[Sequence[int]] = None, *,
                         resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """``[resamples]`` bootstrap replicates of ``100 * mean over strata of mean(values)``.

    ``values [N]``: per-item numbers (0/1 correctness, or a paired difference in {-1, 0, 1}).
    See the module docstring for the exact draw.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    blocks = stratum_blocks(strata, n)
    rng = np.random.default_rng(seed)
    chunk = max(1, CHUNK_NUMBERS // n)
    out = np.empty(resamples, dtype=np.float64)
    done = 0
    while done < resamples:
        size = min(chunk, resamples - done)
        uniform = rng.random((size, n))  # row r is the r-th call of rng.random(n)
        stratum_means = np.empty((size, len(blocks)), dtype=np.float64)
        for column, (start, end) in enumerate(blocks):
            length = end - start
            picks = np.minimum((uniform[:, start:end] * length).astype(np.int64), length - 1)
            stratum_means[:, column] = values[start + picks].mean(axis=1)
        out[done:done + size] = 100.0 * stratum_means.mean(axis=1)
        done += size
    return out


def percentile_interval(statistics: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """The ``level`` percentile interval of bootstrap ``statistics``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    low, high = np.percentile(statistics, [100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0])
    return float(low), float(high)


def accuracy_interval(correct: np.ndarray, strata: Optional[Sequence[int]] = None, *,
                      resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                      level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Bootstrap interval (percent) of one run's score on its items."""
    return percentile_interval(bootstrap_statistics(correct, strata, resamples=resamples, seed=seed), level)


def paired_difference_interval(reference: np.ndarray, method: np.ndarray, strata: Optional[Sequence[int]] = None, *,
                               resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                               level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Paired bootstrap interval (points) of ``score(method) - score(reference)`` over the same items.

    Both runs are resampled with the same item draws; because the score is a mean of per-stratum
    means, the difference of scores is the stratified mean of per-item differences.
    """
    reference = np.asarray(reference, dtype=np.float64)
    method = np.asarray(method, dtype=np.float64)
    if reference.shape != method.shape:
        raise ValueError(f"paired runs need the same items: shapes {reference.shape} and {method.shape}")
    return percentile_interval(bootstrap_statistics(method - reference, strata, resamples=resamples, seed=seed), level)


def mcnemar_exact(right_to_wrong: int, wrong_to_right: int) -> float:
    """McNemar's exact test, two-sided: ``min(1, 2 * P[X <= min(b, c)])`` for ``X ~ Binomial(b + c, 1/2)``.

    ``b`` = ``right_to_wrong`` (items the reference got right and the method wrong), ``c`` =
    ``wrong_to_right``; items both got right or both wrong do not enter. ``b = c = 0`` gives 1.
    Computed exactly with integers (``math.comb``), so large counts lose no precision.
    """
    b, c = int(right_to_wrong), int(wrong_to_right)
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2 ** n)
