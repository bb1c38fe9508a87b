"""A cell's files as the tests check them: ``cell.json`` exactly as written (a JSON object, to
check what is on disk), and whether the cell is finished, as the reader says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from vcast.results.layout import CELL_FILE, DONE_FILE
from vcast.results.tree import Cell

__all__ = ["CELL_FILE", "DONE_FILE", "is_complete", "read_cell"]


def read_cell(cell_dir: Path) -> Optional[dict[str, Any]]:
    """``<cell_dir>/cell.json`` as written; None when there is none."""
    path = Path(cell_dir) / CELL_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def is_complete(cell_dir: Path) -> bool:
    return Cell(Path(cell_dir)).is_complete
