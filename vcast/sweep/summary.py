"""The end of a sweep: one line per outcome count, the cells that need attention, and an exit code.

Every job appends its outcome (cell, status, error) to ``outcomes.jsonl`` in the sweep's Hydra
folder (``<results_root>/.hydra/sweep/<time>/``, or the run folder of a single cell), from
whichever process or SLURM node ran it; :class:`SweepSummary`, a Hydra callback in the launching
process, reads them when the sweep ends, logs the summary and sets :func:`exit_code`: 1 when any
cell was invalid, failed, ran out of memory or was refused as a mismatch, else 0.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from vcast.eval.efficiency import read_jsonl

logger = logging.getLogger("vcast.sweep")

OUTCOMES_FILE = "outcomes.jsonl"
NEEDS_ATTENTION = ("invalid", "failed", "oom", "mismatch")
_exit_code = 0


def record_outcome(directory: Path, outcome: dict[str, Any]) -> None:
    """Append one job's outcome to ``directory/outcomes.jsonl`` (one short line: atomic append)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / OUTCOMES_FILE).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(outcome) + "\n")


def summarize(directory: Path) -> int:
    """Log the outcomes under ``directory``; 1 when any needs attention, else 0."""
    outcomes = read_jsonl(directory, OUTCOMES_FILE)
    if not outcomes:
        logger.warning("no cell reported an outcome to %s", Path(directory) / OUTCOMES_FILE)
        return 0
    counts = Counter(outcome["status"] for outcome in outcomes)
    logger.info("sweep done: %d cell(s): %s", len(outcomes), ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    bad = [outcome for outcome in outcomes if outcome["status"] in NEEDS_ATTENTION]
    for outcome in bad:
        logger.error("%s %s: %s", outcome["status"], outcome.get("cell") or "(no cell)", outcome.get("error", ""))
    return 1 if bad else 0


def exit_code() -> int:
    """What the sweep process should exit with (set when the sweep ends)."""
    return _exit_code


class SweepSummary(Callback):
    """Hydra callback (``hydra.callbacks.summary`` in ``configs/sweep.yaml``)."""

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._finish(Path(config.hydra.run.dir))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._finish(Path(config.hydra.sweep.dir))

    @staticmethod
    def _finish(directory: Path) -> None:
        global _exit_code
        _exit_code = summarize(directory)
