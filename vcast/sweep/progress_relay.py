"""Relay a cell's lmms-eval progress bars (tqdm) from its log stream to the console.

A cell's whole output goes to its ``run.log``; on an interactive console the sweep also shows
the bars in it (lmms-eval's "Model Responding" and the like) as one self-updating line, so a
long cell is not silent. Everything else (warnings, logs) stays in the log file.
"""

from __future__ import annotations

import re
from typing import Optional, TextIO

# A tqdm bar: "<desc>:  40%|####      | 4/10 [00:01<00:02, 2.9it/s]"
_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+")
_SEPARATORS = re.compile(rb"[\r\n]")


class ProgressRelay:
    """Feed it the raw output bytes; it writes each complete tqdm bar line to ``console`` as
    ``\\r<prefix><bar>`` (overwriting the previous one) and a newline at :meth:`close`."""

    def __init__(self, console: Optional[TextIO], prefix: str = "", width: int = 160) -> None:
        self.console = console
        self.prefix = prefix
        self.width = width
        self._pending = b""
        self._shown = 0  # length of the line on screen (0: none)

    def feed(self, chunk: bytes) -> None:
        if self.console is None:
            return
        parts = _SEPARATORS.split(self._pending + chunk)
        self._pending = parts.pop()  # an unfinished segment waits for its separator
        for part in parts:
            self._show(part)

    def _show(self, segment: bytes) -> None:
        text = segment.decode("utf-8", errors="replace").strip()
        if not _BAR.search(text):
            return
        line = (self.prefix + text)[: self.width]
        assert self.console is not None
        self.console.write("\r" + line + " " * max(0, self._shown - len(line)))
        self.console.flush()
        self._shown = len(line)

    def close(self) -> None:
        """End the relayed line (the last bar stays on screen)."""
        if self.console is None:
            return
        self._show(self._pending)
        self._pending = b""
        if self._shown:
            self.console.write("\n")
            self.console.flush()
            self._shown = 0
