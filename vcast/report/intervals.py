"""``--intervals``: a ``±`` next to each score of a built table.

The ``±`` is half the width of the cell's own bootstrap interval of its score (percentile
interval, items resampled within the benchmark's strata; see :mod:`vcast.report.significance`),
from :func:`vcast.report.analysis.accuracy_intervals`. It says how much the score of that one
run could move with another draw of the same benchmark's questions; whether two methods
differ is the paired analysis' job (``<stem>-analysis.*``), since two runs on the same items
are correlated and overlapping intervals can still hide a significant difference.
Derived columns (Average, %) and efficiency columns get none.
"""

from __future__ import annotations

import logging
import math
from typing import Optional, Sequence

import pandas as pd

from vcast.report.layouts import DERIVED_KEYS
from vcast.report.tables import Table

logger = logging.getLogger(__name__)


def attach_intervals(table: Table, intervals: pd.DataFrame, *, experiments: Optional[Sequence[str]] = None,
                     profile: Optional[str] = None) -> int:
    """Set ``entry.intervals`` of ``table``'s rows from ``intervals`` (the frame of
    :func:`~vcast.report.analysis.accuracy_intervals`); returns how many values got one.

    A value gets a ``±`` only when it is the same run's score: a cell whose items were scored
    differently from the table's value (a results file disagreeing with its samples) is skipped.
    """
    rows = intervals[intervals["model"] == table.model]
    if experiments:
        rows = rows[rows["experiment"].isin(list(experiments))]
    if profile is not None:
        rows = rows[rows["profile"] == profile]
    lookup = {}
    for row in rows.sort_values(["experiment", "cell"]).itertuples(index=False):
        lookup.setdefault((int(row.frames), round(float(row.ratio), 6), row.method, row.benchmark), row)
    attached = 0
    for entry in table.rows:
        for column in table.layout.columns:
            if column.key in DERIVED_KEYS or entry.states.get(column.key) != "ok":
                continue
            found = lookup.get((entry.frames, round(entry.ratio or 0.0, 6), entry.method, column.source or column.key))
            if found is None:
                continue
            if not math.isclose(found.score, entry.values[column.key], abs_tol=0.05):
                logger.warning("%s %s: the table's %.2f is not the samples' %.2f; no ± for it", found.cell,
                               column.key, entry.values[column.key], found.score)
                continue
            entry.intervals[column.key] = (found.ci_high - found.ci_low) / 2.0
            attached += 1
    if attached:
        first = rows.iloc[0]
        table.extra_notes.append(
            f"± half the width of the cell's {100 * first['level']:g}% bootstrap interval of its own score "
            f"({int(first['resamples'])} resamples, seed {int(first['seed'])}); compare methods with the paired "
            "analysis (-analysis files), not by overlapping intervals.")
    return attached
