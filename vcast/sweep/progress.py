"""Sweep progress: "[n/N] cell: status, elapsed, ETA" after each cell, from any launcher.

The launching process writes ``progress.json`` (the job count, how many of them have nothing to
run, the start time, the cells) into the sweep's Hydra folder before any job starts; every job, in
whichever process or node runs it, appends its outcome to ``outcomes.jsonl`` there
(:mod:`vcast.sweep.summary`), so n is the number of outcomes and the ETA is the wall time per cell
that ran so far times the cells still to run (parallel launchers included).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from vcast.atomic_files import atomic_write_json
from vcast.eval.efficiency import read_jsonl

PROGRESS_FILE = "progress.json"
RAN = ("ok", "failed", "oom")  # outcomes that spent time running (skipped, invalid... took none)


def start_progress(directory: Path, total: int, finished: int, cells: Sequence[str] = (),
                   now: Optional[float] = None) -> None:
    """Record the sweep before its first job: ``total`` jobs, ``finished`` of them with nothing to
    run, and its ``cells`` (paths relative to the results root, for ``status``'s pending cells)."""
    atomic_write_json(Path(directory) / PROGRESS_FILE,
                      {"total": total, "finished": finished, "started_at": time.time() if now is None else now,
                       "cells": list(cells)})


def duration(seconds: float) -> str:
    """``2h05m``, ``3m10s``, ``42s``."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(directory: Path, outcome: dict[str, Any], now: Optional[float] = None) -> Optional[str]:
    """The line to log after ``outcome`` (already appended to the outcomes), or None when the
    launching process wrote no progress file (a single cell)."""
    from vcast.sweep.summary import OUTCOMES_FILE

    try:
        state = json.loads((Path(directory) / PROGRESS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    outcomes = read_jsonl(directory, OUTCOMES_FILE)
    total, done = int(state["total"]), len(outcomes)
    elapsed = (time.time() if now is None else now) - float(state["started_at"])
    ran = sum(o.get("status") in RAN for o in outcomes)
    to_run = max(0, total - int(state.get("finished", 0)))  # cells that are not skipped, at most
    remaining = max(0, to_run - ran)
    eta = "done" if done >= total else ("?" if ran == 0 else duration(elapsed / ran * remaining))
    return (f"[{done}/{total}] {outcome.get('cell') or '(invalid cell)'}: {outcome.get('status')}"
            f" | elapsed {duration(elapsed)}, ETA {eta}")
