"""The sweep ends with a summary of its cells and exits non-zero when any needs attention."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra")

from vcast.sweep.summary import record_outcome, summarize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_summarize_counts_and_flags(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for status in ("ok", "skipped", "busy"):
        record_outcome(tmp_path, {"cell": f"c/{status}", "status": status})
    assert summarize(tmp_path) == 0
    record_outcome(tmp_path, {"cell": "c/bad", "status": "mismatch", "error": "limit: 2.0 -> None"})
    with caplog.at_level("INFO", logger="vcast.sweep"):
        assert summarize(tmp_path) == 1
    assert "4 cell(s): 1 busy, 1 mismatch, 1 ok, 1 skipped" in caplog.text
    assert "mismatch c/bad: limit: 2.0 -> None" in caplog.text
    assert summarize(tmp_path / "nothing") == 0


@pytest.mark.parametrize("multirun", [False, True])
def test_a_sweep_with_a_failed_cell_exits_non_zero(tmp_path: Path, multirun: bool) -> None:
    """Cells refused before running (Qwen3-VL reads at least 2 frames): no model is loaded."""
    methods = "random,uniform" if multirun else "random"
    command = [sys.executable, "-m", "vcast.sweep", f"results_root={tmp_path}", "model=tiny_qwen3vl",
               "task=vcast_synth", f"method={methods}", "frames=1",
               "preflight=false",  # no checkpoint or data is needed to refuse them
               *(["-m"] if multirun else [])]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    output = run.stdout + run.stderr
    assert run.returncode == 1, output[-3000:]
    cells = 2 if multirun else 1
    assert f"sweep done: {cells} cell(s): {cells} failed" in output
    assert "reads at least 2 frames" in output
