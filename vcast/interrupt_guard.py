"""Ctrl-C ends a vcast command with one line on stderr and exit status 130, whenever it comes.

A command module calls :func:`guard_imports` first thing under ``if __name__ == "__main__":``,
before its heavy imports (torch, pandas, lmms-eval: a second or two): a SIGINT in that window
exits at once, since nothing has been written yet. :func:`vcast.closed_pipe.run_command` then puts
Python's own handler back for ``main`` and turns the KeyboardInterrupt it raises into the same
line and status, after ``finally`` blocks have run (an atomic write in progress removes its
temporary file). The sweep has its own handler (:class:`vcast.sweep.__main__.Interrupts`), which
also waits for Hydra and for a cell folder being swapped in.

Out of reach: the interpreter's own start-up before the command module runs (``python -m`` imports
the ``vcast`` package first, which loads nothing heavy), where Python's default handler applies.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import Optional

INTERRUPTED_STATUS = 130  # 128 + SIGINT, what a shell reports for a command Ctrl-C stopped
INTERRUPTED_LINE = "interrupted"


def _exit_during_imports(signum: int, frame: Optional[FrameType]) -> None:
    os._exit(report_interrupt())  # nothing to clean up yet: the command has not started


def guard_imports() -> None:
    """Until :func:`release` (``run_command`` calls it), a SIGINT exits with one line and 130.
    Left alone where SIGINT is ignored (a background job of a shell without job control) or this is
    not the main thread."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _exit_during_imports)


def release() -> None:
    """Python's own SIGINT handler again (a KeyboardInterrupt in ``main``), if :func:`guard_imports` set ours."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is _exit_during_imports:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def report_interrupt() -> int:
    """The one line on stderr, and the status to exit with."""
    try:
        sys.stderr.write(f"{INTERRUPTED_LINE}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: the status still says it
        pass
    return INTERRUPTED_STATUS
