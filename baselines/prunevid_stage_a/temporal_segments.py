"""PruneVid's temporal segments from cluster labels: the official ``refine_clusters`` and
``segment_lengths`` (Visual-AI/PruneVid@b12600c ``models/pllava/modeling_pllava.py`` L184-316),
shared by stage A's paper and official variants."""

from __future__ import annotations


def refine_labels(labels: list[int]) -> list[int]:
    """Make temporal cluster labels contiguous, as the official ``refine_clusters`` does.

    Per label, its longest run(s) are kept and its other runs become -1; a label whose longest
    run has length 1 becomes -1 everywhere. Then, left to right, each run of -1 takes the label
    of the neighbour whose adjacent run is longer (measured on the labels as already refined,
    so an earlier filled run counts), the left one on ties, label 0 if it has no neighbour.
    Loops over frames (T is small).
    """
    n = len(labels)
    runs: dict[int, list[tuple[int, int]]] = {}
    start = 0
    for i in range(1, n + 1):
        if i == n or labels[i] != labels[start]:
            runs.setdefault(labels[start], []).append((start, i))
            start = i
    refined = list(labels)
    for label_runs in runs.values():
        longest = max(end - begin for begin, end in label_runs)
        for begin, end in label_runs:
            if longest == 1 or end - begin < longest:
                refined[begin:end] = [-1] * (end - begin)
    i = 0
    while i < n:
        if refined[i] != -1:
            i += 1
            continue
        begin = i
        while i < n and refined[i] == -1:
            i += 1
        left = right = None
        left_length = right_length = 0
        if begin > 0:
            left = refined[begin - 1]
            j = begin - 1
            while j >= 0 and refined[j] == left:
                j -= 1
            left_length = begin - 1 - j
        if i < n:
            right = refined[i]
            j = i
            while j < n and refined[j] == right:
                j += 1
            right_length = j - i
        if right_length > left_length:
            new = right
        else:
            new = left if left is not None else right
        refined[begin:i] = [0 if new is None else new] * (i - begin)
    return refined


def run_lengths(labels: list[int]) -> list[int]:
    """Lengths of the runs of equal labels, in order (the official ``segment_lengths``)."""
    lengths: list[int] = []
    for i, label in enumerate(labels):
        if i > 0 and label == labels[i - 1]:
            lengths[-1] += 1
        else:
            lengths.append(1)
    return lengths
