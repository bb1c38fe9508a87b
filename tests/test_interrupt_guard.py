"""Ctrl-C ends a vcast command with one line and exit status 130 at any moment, its imports
included (the sweep's own moments: tests/test_sweep_progress.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vcast.closed_pipe import run_command
from vcast.interrupt_guard import INTERRUPTED_STATUS

ROOT = Path(__file__).resolve().parents[1]
IMPORTING = "libtorch_cpu"  # mapped while ``import torch`` runs: well inside the command's imports


def _interrupt_while_importing(arguments: list[str]) -> tuple[int, str]:
    """Start ``python -m <arguments>``, send SIGINT once torch's library is mapped (the command is
    importing), and return (exit status, stderr)."""
    process = subprocess.Popen([sys.executable, "-m", *arguments], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    deadline = time.monotonic() + 60
    try:
        while IMPORTING not in Path(f"/proc/{process.pid}/maps").read_text():
            assert process.poll() is None and time.monotonic() < deadline, "the command never imported torch"
            time.sleep(0.002)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    return process.returncode, err


@pytest.mark.parametrize("arguments", [["vcast.report", "list"], ["vcast.method_table"],
                                       ["vcast.sweep", "method=vanilla", "dry_run=true"]],
                         ids=["report", "method_table", "sweep"])
def test_ctrl_c_during_the_imports_prints_one_line_and_exits_130(arguments: list[str]) -> None:
    code, err = _interrupt_while_importing(arguments)
    assert code == INTERRUPTED_STATUS, err[-2000:]
    assert len(err.strip().splitlines()) == 1 and err.startswith("interrupted"), err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_ctrl_c_inside_a_command_prints_one_line_and_exits_130(capsys: pytest.CaptureFixture) -> None:
    cleaned = []

    def main() -> int:
        try:
            raise KeyboardInterrupt  # as Python's handler raises it where the main thread is
        finally:
            cleaned.append(True)  # finally blocks run: an atomic write removes its temporary file

    previous = signal.getsignal(signal.SIGINT)
    try:
        assert run_command(main) == INTERRUPTED_STATUS
    finally:
        signal.signal(signal.SIGINT, previous)
    assert cleaned == [True] and capsys.readouterr().err == "interrupted\n"
