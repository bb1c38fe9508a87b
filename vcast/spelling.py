"""The names a user probably meant: edit distance and the closest candidates, for "did you mean ...?".

Pure Python (no torch, no Hydra), so the sweep's command-line checks and the registry's errors can
use it anywhere. The distance is Damerau-Levenshtein's optimal string alignment: an insertion, a
deletion, a substitution or a swap of two adjacent letters costs one edit (``ratoi`` -> ``ratio``
is 1, not 2), and no substring is edited twice.
"""

from __future__ import annotations

from typing import Iterable

# A prefix this long or longer names the word it begins (``attn`` -> ``attn_implementation``); a
# shorter one begins too many words to mean any of them.
MIN_PREFIX = 4


def edit_distance(a: str, b: str) -> int:
    """The optimal-string-alignment distance between ``a`` and ``b`` (case-sensitive)."""
    if a == b:
        return 0
    # rows[i][j]: the distance between a[:i] and b[:j]; three rows suffice for the transposition
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        before, previous = previous, current
    return previous[-1]


def max_edits(name: str) -> int:
    """How many edits still make a typo of ``name``: one per three letters, at least one."""
    return max(1, len(name) // 3)


def closest(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """The ``candidates`` that ``name`` is probably a misspelling of, best first, at most ``limit``.

    A candidate is close when it is at most :func:`max_edits` ``(name)`` edits away (case
    ignored), or when one of the two begins the other and the shorter has at least
    :data:`MIN_PREFIX` letters (``seeds`` -> ``seed``, ``attn`` -> ``attn_implementation``). Of
    those, only the ones at most one edit further than the closest are returned (``VCast`` is
    ``vcast``, not also ``vcast_tau06``). Ties in distance keep the candidates' order. ``name``
    itself is never returned.
    """
    typed = name.lower()
    ranked: list[tuple[int, int, str]] = []
    for order, candidate in enumerate(dict.fromkeys(candidates)):
        if candidate == name:
            continue
        other = candidate.lower()
        distance = edit_distance(typed, other)
        short, long = sorted((typed, other), key=len)
        if distance <= max_edits(name) or (len(short) >= MIN_PREFIX and long.startswith(short)):
            ranked.append((distance, order, candidate))
    ranked.sort()
    return [candidate for distance, _, candidate in ranked[:limit] if distance <= ranked[0][0] + 1]


def did_you_mean(name: str, candidates: Iterable[str], limit: int = 3) -> str:
    """``"did you mean a or b?"`` for the :func:`closest` candidates of ``name``; ``""`` when none is close."""
    return suggestion(closest(name, candidates, limit))


def suggestion(spellings: list[str]) -> str:
    """``"did you mean a, b or c?"``; ``""`` for no spelling."""
    if not spellings:
        return ""
    words = spellings[0] if len(spellings) == 1 else f"{', '.join(spellings[:-1])} or {spellings[-1]}"
    return f"did you mean {words}?"
