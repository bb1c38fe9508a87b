"""One log line per reason, not one per cell: a grid of 67 CPU cells says "peak memory is process
memory" once, with the count and a few of the cells, instead of 67 identical lines."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Hashable, Sequence

EXAMPLES = 3  # cells named in a line; the rest are counted


def some_of(names: Sequence[str], shown: int = EXAMPLES) -> str:
    """``a, b, c`` or, with more, ``a, b, c, … (12 more)``."""
    listed = ", ".join(names[:shown])
    return listed if len(names) <= shown else f"{listed}, … ({len(names) - shown} more)"


class SharedReasons:
    """Cells gathered under the reason they share, then logged once per reason (in the order the
    reasons first came) by :meth:`log`."""

    def __init__(self) -> None:
        self._cells: dict[Hashable, list[str]] = defaultdict(list)

    def add(self, reason: Hashable, cell: str) -> None:
        self._cells[reason].append(cell)

    def log(self, logger: logging.Logger, level: int, message: str) -> None:
        """Per reason: ``message.format(count=<cells>, reason=<reason>)``, then ``: <some cells>``."""
        for reason, cells in self._cells.items():
            logger.log(level, "%s: %s", message.format(count=len(cells), reason=reason), some_of(cells))
        self._cells.clear()
