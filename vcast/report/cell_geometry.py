"""The input the finished cells of an experiment ran with (checkpoint, frames, pixel bounds), so a
figure drawn beside their table describes the same videos the cells saw."""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from vcast.report.collect import cell_dirs
from vcast.sweep.cell import CELL_FILE, why_incomplete

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CellGeometry:
    """What one group of cells fed the model: the checkpoint, frames sampled per video, and the
    Qwen3-VL pixel bounds (None where the model config sets none)."""

    pretrained: str
    frames: int
    max_pixels: Optional[int]
    min_pixels: Optional[int]
    cells: int  # how many finished cells ran with it


def cell_geometry(results: Path, experiments: Sequence[str], model: Optional[str] = None) -> Optional[CellGeometry]:
    """The geometry most finished cells of ``experiments`` (of config ``model``, when given) under
    ``results`` share, ties to the fewest frames; None when no finished cell is found."""
    counts: Counter[tuple[str, int, Optional[int], Optional[int]]] = Counter()
    for experiment in experiments:
        folder = Path(results) / experiment
        if not folder.is_dir():
            continue
        for cell_dir, _ in cell_dirs(folder):
            try:
                record = json.loads((cell_dir / CELL_FILE).read_text(encoding="utf-8"))
                spec = record["spec"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # the report's collect step names unreadable cells
            if why_incomplete(cell_dir, record) is not None or (model is not None and spec.get("model") != model):
                continue
            args = spec.get("model_args") or {}
            counts[(str(spec["pretrained"]), int(spec["frames"]), args.get("max_pixels"), args.get("min_pixels"))] += 1
    if not counts:
        return None
    (pretrained, frames, max_pixels, min_pixels), n = min(counts.items(), key=lambda item: (-item[1], item[0][1],
                                                                                             str(item[0])))
    if len(counts) > 1:
        logger.info("cells of %s ran with %d input settings; the figure takes the most common (%d cells: %s, %d "
                    "frames)", ", ".join(experiments), len(counts), n, pretrained, frames)
    return CellGeometry(pretrained, frames, max_pixels, min_pixels, n)
