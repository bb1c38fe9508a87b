"""``python -m vcast.sweep.status results/<experiment>``: one line per cell with its status, score
and efficiency figures, read from the cells' ``cell.json`` files (nothing is re-run)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from vcast.sweep.cell import CELL_FILE, is_complete, read_cell

COLUMNS = ("cell", "status", "score", "prefill_s", "generation_s", "total_s", "peak_mb", "items_per_s",
           "tokens_kept/total")


def _first_score(scores: dict[str, dict[str, float]]) -> Optional[float]:
    """The cell's headline score: its only task's only metric, or the mean over tasks (MVBench's
    20 subtasks) when each task has one metric."""
    values = [next(iter(metrics.values())) for metrics in scores.values() if len(metrics) == 1]
    return sum(values) / len(values) if values else None


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def cell_rows(root: Path) -> list[tuple[str, ...]]:
    """One row per cell folder under ``root`` (sorted by path)."""
    rows = []
    for cell_file in sorted(root.rglob(CELL_FILE)):
        cell_dir = cell_file.parent
        if cell_dir.name.startswith("."):
            continue  # a staging folder of a running or killed attempt
        record = read_cell(cell_dir) or {}
        status = record.get("status", "unreadable")
        if status == "ok" and not is_complete(cell_dir):
            status = "incomplete"
        limit = (record.get("spec") or {}).get("limit")
        if status == "ok" and limit is not None:
            status = f"partial (limit {limit:g})"  # a smoke run, not a full result
        missing = (record.get("missing_visuals") or {}).get("count")
        if status != "unreadable" and missing:
            status += f", {missing} missing video(s)"
        efficiency = record.get("efficiency") or {}
        kept, total = efficiency.get("mean_video_tokens_kept"), efficiency.get("mean_video_tokens_total")
        rows.append((
            str(cell_dir.relative_to(root)), status, _fmt(_first_score(record.get("scores") or {}), 4),
            _fmt(efficiency.get("prefill_latency_s")), _fmt(efficiency.get("generation_latency_s")),
            _fmt(efficiency.get("total_latency_s")), _fmt(efficiency.get("peak_memory_mb"), 5),
            _fmt(efficiency.get("throughput_items_per_s")),
            "-" if kept is None else f"{kept:.0f}/{total:.0f}",
        ))
    return rows


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(row[i])) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(str(value).ljust(width) for value, width in zip(row, widths)).rstrip()
             for row in [COLUMNS, *rows]]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vcast.sweep.status", description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, help="a results folder, e.g. results/demo")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"no such folder: {args.root}")
    rows = cell_rows(args.root)
    if not rows:
        print(f"no cells under {args.root}", file=sys.stderr)
        return 1
    print(format_table(rows))
    failed = sum(not row[1].startswith(("ok", "partial")) for row in rows)
    print(f"\n{len(rows)} cell(s), {len(rows) - failed} ok, {failed} not ok (see each cell.json / run.log)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
