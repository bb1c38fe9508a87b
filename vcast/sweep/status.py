"""``python -m vcast.sweep.status [results]``: one line per cell with its status, score and
efficiency figures, read from the cells' folders (nothing is re-run).

A cell is ``ok``, ``partial (limit N)`` (a smoke run), ``failed``/``oom``/``incomplete``,
``running`` (a job holds its lock), ``interrupted`` (a staging folder that no job holds: the next
sweep resumes it), both with the cell's ``answered/total`` items, or ``pending`` (in a sweep's
plan, not started). Pending cells come from the plans sweeps write when they start
(``<results>/.hydra/sweep/*/progress.json``), or from ``--grid experiment=<name> ...`` (the sweep's
own words) for a sweep not started yet.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Optional, Sequence

if __name__ == "__main__":  # before the imports below: a Ctrl-C while they load ends with one line too
    from vcast.interrupt_guard import guard_imports

    guard_imports()

from vcast.closed_pipe import run_command  # noqa: E402
from vcast.eval.resume import cell_progress  # noqa: E402
from vcast.results.record import CellRecord  # noqa: E402
from vcast.results.tree import Cell, ResultsTree  # noqa: E402
from vcast.sweep.execute import lock_holder  # noqa: E402
from vcast.sweep.progress import PROGRESS_FILE  # noqa: E402

COLUMNS = ("cell", "status", "score", "prefill_s", "generation_s", "total_s", "peak_mb", "items_per_s",
           "tokens_kept/total")
DEFAULT_ROOT = "results"
NO_SWEEP_YET = "no sweep has run here yet (make demo writes results/demo; python -m vcast.sweep, results/<experiment>)"
GOOD = ("ok", "partial")


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


def _record_status(cell: Cell, record: CellRecord) -> str:
    status = record.status
    if status == "ok" and not cell.is_complete:
        status = "incomplete"
    limit = record.spec.limit
    if status == "ok" and limit is not None:
        status = f"partial (limit {limit:g})"  # a smoke run, not a full result
    missing = record.missing_visuals.count
    if missing:
        status += f", {missing} missing video(s)"
    return status


def answered_note(cell: Cell, running: Optional[int] = None) -> str:
    """``" (answered/total answered, attempt n)"`` of a running or interrupted resumable cell, from
    its working folder's response cache (``total`` is ``?`` until the attempt has counted its
    items); empty when it has none. ``running``: the attempt the job holding the cell says it runs
    (it records it in the cache only once its model is loaded)."""
    found = cell_progress(cell.work_cache, cell.work_efficiency)
    if found is None:
        return "" if running is None else f" (attempt {running}, starting)"
    done, total, attempts = found
    if running is not None and running > attempts:
        return f" ({done} answered before it, attempt {running}, starting)"
    return f" ({done}/{'?' if total is None else total} answered, attempt {attempts})"


def running_attempt(holder: str) -> Optional[int]:
    """The attempt a lock holder's line names (``..., attempt 2, since ...``), or None."""
    found = re.search(r"\battempt (\d+)\b", holder)
    return int(found.group(1)) if found else None


def cell_status(cell: Cell) -> str:
    """The status of ``cell`` (see the module docstring); ``pending`` when nothing of it exists."""
    holder = lock_holder(cell.path)
    if holder is not None:
        return "running" + answered_note(cell, running_attempt(holder))
    if cell.staged and not cell.is_complete:
        return "interrupted" + answered_note(cell)  # the next attempt resumes from its answered items
    try:
        record = cell.record
    except ValueError:
        return "unreadable"
    if record is None:
        return "pending" if not cell.path.exists() else "unreadable"
    return _record_status(cell, record)


def _row(cell: Cell) -> tuple[str, ...]:
    record = cell.readable_record()
    efficiency = record.efficiency if record is not None else None
    kept = efficiency.mean_video_tokens_kept if efficiency is not None else None
    total = efficiency.mean_video_tokens_total if efficiency is not None else None
    return (
        cell.rel, cell_status(cell), _fmt(_first_score(record.scores if record is not None else {}), 4),
        _fmt(efficiency.prefill_latency_s if efficiency else None),
        _fmt(efficiency.generation_latency_s if efficiency else None),
        _fmt(efficiency.total_latency_s if efficiency else None),
        _fmt(efficiency.peak_memory_mb if efficiency else None, 5),
        _fmt(efficiency.throughput_items_per_s if efficiency else None),
        "-" if kept is None else f"{kept:.0f}/{total:.0f}",
    )


def _under(root: Path, cells: Sequence[str]) -> list[str]:
    """``cells`` (relative to a results root) relative to ``root``: the results root itself, or one
    experiment's folder in it (then the other experiments' cells are dropped)."""
    heads = {cell.partition("/")[0] for cell in cells}
    if (root / ".hydra").is_dir() or root.name not in heads:
        return list(cells)
    return [cell.partition("/")[2] for cell in cells if cell.partition("/")[0] == root.name]


def planned_cells(root: Path) -> list[str]:
    """The cells of every sweep started under ``root`` (or under the results root ``root`` is an
    experiment folder of), from their plans, relative to ``root``."""
    cells: list[str] = []
    base = root if (root / ".hydra").is_dir() else root.parent
    for plan in sorted((base / ".hydra").glob(f"sweep/*/{PROGRESS_FILE}")):
        try:
            cells += json.loads(plan.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError):
            continue
    return _under(root, cells)


def grid_cells(root: Path, words: Sequence[str]) -> list[str]:
    """The cells of ``python -m vcast.sweep <words> -m`` (composed, nothing run), relative to ``root``."""
    from vcast.sweep.grid import command_line_grid

    return _under(root, [job.spec.name for job in command_line_grid(words) if job.spec is not None])


def tree_cells(root: Path, extra: Sequence[str] = ()) -> list[Cell]:
    """Every cell under ``root``: those with a record, those with only a working folder, and the
    ``extra`` relative paths (planned cells), sorted and without repeats."""
    return ResultsTree(root).cells(staged=True, extra=extra)


def cell_rows(root: Path, extra: Sequence[str] = ()) -> list[tuple[str, ...]]:
    """One row per cell under ``root`` (sorted by path), planned cells included."""
    return [_row(cell) for cell in tree_cells(root, extra)]


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(row[i])) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(str(value).ljust(width) for value, width in zip(row, widths)).rstrip()
             for row in [COLUMNS, *rows]]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vcast.sweep.status", description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, nargs="?", default=Path(DEFAULT_ROOT),
                        help=f"a results folder or one experiment's folder (default: ./{DEFAULT_ROOT})")
    parser.add_argument("--grid", nargs="+", metavar="OVERRIDE", default=None,
                        help="a sweep's words (e.g. experiment=qwen3vl_8b): list its cells not started yet as pending; "
                             "root must then be the sweep's results_root")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"no such folder: {args.root.resolve()} (give the results folder, e.g. results/demo; {NO_SWEEP_YET})")
    extra = planned_cells(args.root) + (grid_cells(args.root, args.grid) if args.grid else [])
    cells = tree_cells(args.root, extra)
    rows = [_row(cell) for cell in cells]
    if not rows:
        print(f"no cells under {args.root.resolve()}: {NO_SWEEP_YET}", file=sys.stderr)
        return 1
    print(format_table(rows))
    counts = Counter(row[1].split(" ")[0].rstrip(",") for row in rows)
    bad = sum(n for status, n in counts.items() if status not in (*GOOD, "running", "pending", "interrupted"))
    print(f"\n{len(rows)} cell(s): " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
          + ("" if not bad else f"; {bad} not ok (each one's log: <cell>/run.log)"))
    causes = failure_causes(cells)
    if causes:
        print("\nwhy:\n" + "\n".join(causes))
    return 0


def failure_causes(cells: Sequence[Cell]) -> list[str]:
    """``<cell>: <status>: <error>`` for each of ``cells`` whose record holds an error (failed,
    oom, refused by pre-flight), or that cannot be read: the cause, where the table has room only
    for the status."""
    lines = []
    for cell in cells:
        try:
            record = cell.record
        except ValueError as error:
            lines.append(f"{cell.rel}: unreadable: {error}")
            continue
        if record is not None and record.error and not cell.is_complete:
            lines.append(f"{cell.rel}: {record.status}: {record.error}")
    return lines


if __name__ == "__main__":
    raise SystemExit(run_command(main))
