"""Commands whose reader stops early end quietly: ``python -m vcast.sweep.status | head -1``.

When the reader of stdout closes its end (``head``, a pager quit early), the next write raises
``BrokenPipeError``; without care Python prints a traceback, then a second complaint from its own
flush of stdout at exit. :func:`run_command` runs a command's ``main`` and turns that into a
silent exit with status :data:`CLOSED_PIPE_STATUS`.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from typing import Callable, Optional

from vcast.frozen_heap import freeze_heap
from vcast.interrupt_guard import guard_imports, release, report_interrupt

# 128 + SIGPIPE: what a shell reports for a tool killed by the signal (``yes | head -1``), so
# ``set -o pipefail`` scripts see the same status as for any other command stopped early, and
# can tell it from a success (0) and from a failure of the command (1, 2).
CLOSED_PIPE_STATUS = 128 + signal.SIGPIPE


def stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone: poll reports an error on it."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # no file descriptor (a replaced sys.stdout) or a closed one
        return False


def run_command(main: Callable[[], Optional[int]]) -> int:
    """``main()``'s exit status; :data:`CLOSED_PIPE_STATUS`, with nothing printed, when stdout's
    reader closed it; 130 with one line when Ctrl-C stopped it (:mod:`vcast.interrupt_guard`, whose
    guard also covers the command's imports and Python's shutdown after it). A ``BrokenPipeError``
    from anything else (a pipe to a child process) is raised as usual: it is a real failure."""
    freeze_heap()  # what the command imported (torch, pandas), never walked again (still under the import guard)
    release()
    try:
        try:
            status = main()
        except SystemExit:
            sys.stdout.flush()  # what argparse printed before it exits (--help)
            raise
        sys.stdout.flush()  # here, not in the interpreter's flush at exit, where it could not be caught
    except KeyboardInterrupt:
        return report_interrupt()
    except BrokenPipeError:
        if not stdout_closed():
            raise
        # The interpreter flushes stdout once more at exit, which would raise again: point the
        # file descriptor at devnull so that flush (of what is still buffered) goes nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return CLOSED_PIPE_STATUS
    finally:
        guard_imports()  # a Ctrl-C during Python's shutdown: the line and 130, not an atexit traceback
        freeze_heap()  # and that shutdown does not walk what main made either
    return status or 0
