"""Commands piped into a reader that stops early (``python -m vcast.sweep.status | head -1``) end
quietly: the lines before the close arrive, then no traceback and exit status 141 (128 + SIGPIPE)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vcast.closed_pipe import CLOSED_PIPE_STATUS, run_command
from vcast.sweep.progress import start_progress

ROOT = Path(__file__).resolve().parents[1]
PLANNED = 3000  # pending cells: some 400 kB of status table, far more than a pipe holds (64 kB)


def closed_early(args: list[str], *, read_first: bool) -> tuple[str, int, str]:
    """Run ``python <args>`` with stdout into a pipe that this side closes after reading one line
    (or before reading anything); ``(that line, exit status, stderr)``. Stdout is block-buffered, as
    in a user's shell: under PYTHONUNBUFFERED a large write to a full pipe is cut short silently
    (and argparse swallows its own write's error), so the command would not see the close."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    process = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline() if read_first else ""
    process.stdout.close()
    stderr = process.stderr.read()
    return first, process.wait(timeout=120), stderr


@pytest.fixture(scope="module")
def planned_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results root whose only content is a started sweep's plan of :data:`PLANNED` cells."""
    root = tmp_path_factory.mktemp("results")
    cells = [f"demo/demo_qwen3vl/32f/method{i:04d}/r0.25/vcast_synth_heldout" for i in range(PLANNED)]
    start_progress(root / ".hydra" / "sweep" / "20260101_000000", len(cells), 0, cells)
    return root


def test_status_piped_into_head_ends_quietly(planned_root: Path) -> None:
    first, status, stderr = closed_early(["-m", "vcast.sweep.status", str(planned_root)], read_first=True)
    assert first.split()[:2] == ["cell", "status"]
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and "Exception ignored" not in stderr, stderr
    assert status == CLOSED_PIPE_STATUS == 141


@pytest.mark.parametrize("args", [
    ["-m", "vcast.demo", "--frames", "3000", "--tokens", "4", "--dim", "8"],  # ~140 kB: fills the pipe
])
def test_long_output_piped_into_head_ends_quietly(args: list[str]) -> None:
    first, status, stderr = closed_early(args, read_first=True)
    assert first.startswith("V-CAST on a synthetic video")
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert status == CLOSED_PIPE_STATUS


@pytest.mark.parametrize("args", [
    ["-m", "vcast.report", "list"],
    ["-m", "vcast.method_table"],
    ["-m", "vcast.sweep.status", "--help"],  # argparse's exit, after its print
])
def test_short_output_into_a_closed_pipe_ends_quietly(args: list[str]) -> None:
    """Output that fits a pipe fails only when the reader is gone before the write: closed at once."""
    _, status, stderr = closed_early(args, read_first=False)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and "Exception ignored" not in stderr, stderr
    assert status == CLOSED_PIPE_STATUS


def test_a_broken_pipe_that_is_not_stdout_is_raised() -> None:
    """A pipe to a child process breaking is a failure of the command, not a reader stopping early."""
    def main() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        run_command(main)
    assert run_command(lambda: 3) == 3 and run_command(lambda: None) == 0
