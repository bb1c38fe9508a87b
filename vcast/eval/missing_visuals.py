"""Benchmark items whose video is missing or cannot be decoded: recorded per item, not fatal.

Real benchmark releases lose files (MVBench, lmms-eval issue #403). A cell of thousands of items
should not die on one, nor hide it: the plugin answers such an item with an empty string (the task
scores it as it scores any empty answer), appends one line per item to
``<efficiency_dir>/missing_rank<r>.jsonl`` and the sweep copies them into ``cell.json``
(``missing_visuals``). ``missing_visuals=fail`` (a model arg) restores the old behaviour: the first
unreadable video fails the run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from vcast.eval.efficiency import read_jsonl

logger = logging.getLogger(__name__)

POLICIES = ("skip", "fail")


class MissingVisualsLog:
    """Appends one JSON line per unreadable item for one rank; ``directory=None``: memory only."""

    def __init__(self, directory: Optional[str | Path], rank: int) -> None:
        self.items: list[dict[str, Any]] = []
        self.path = None if directory is None else Path(directory) / f"missing_rank{rank}.jsonl"
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def add(self, task: str, doc_id: Any, error: Exception) -> None:
        item = {"task": task, "doc_id": doc_id, "error": f"{type(error).__name__}: {error}"}
        self.items.append(item)
        logger.warning("%s doc %s: %s; answered empty and recorded", task, doc_id, item["error"])
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(item) + "\n")


def read_missing(directory: str | Path) -> list[dict[str, Any]]:
    """Every rank's unreadable items under ``directory`` (empty if there are none), each once: a
    resumed cell's attempts may each have met the same item (the last one's error is kept)."""
    items: dict[tuple[str, str], dict[str, Any]] = {}
    for item in read_jsonl(directory, "missing_rank*.jsonl"):
        items.pop((item["task"], str(item["doc_id"])), None)
        items[(item["task"], str(item["doc_id"]))] = item
    return list(items.values())
