"""A generated block of a docs page: the text between two marker lines, rewritten by a command and
held equal to its source by a test (the method table of ``docs/baselines.md``, the family table of
``docs/models.md``)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

logger = logging.getLogger(__name__)


def page_block(text: str, start: str, end: str) -> Optional[str]:
    """The block between the markers ``start`` and ``end`` in ``text`` (markers included), or None."""
    first, last = text.find(start), text.find(end)
    if first < 0 or last < first:
        return None
    return text[first:last + len(end)]


def write_block(page: Path, start: str, end: str, block: str) -> bool:
    """Replace ``page``'s block with ``block``; True if it changed. ValueError without the markers."""
    text = page.read_text(encoding="utf-8")
    old = page_block(text, start, end)
    if old is None:
        raise ValueError(f"{page} has no generated block (a line {start!r} ... {end!r})")
    if old == block:
        return False
    page.write_text(text.replace(old, block), encoding="utf-8")
    return True


def block_command(argv: Optional[Sequence[str]], prog: str, description: str, page: Path, start: str, end: str,
                  build: Callable[[], str]) -> int:
    """A block's command line: print the block ``build()`` makes, or with ``--write`` rewrite it in ``page``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--write", action="store_true", help=f"rewrite the block in {page.name} instead of printing")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.write:
        sys.stdout.write(build() + "\n")
        return 0
    logger.info("%s: %s", page, "rewritten" if write_block(page, start, end, build()) else "already up to date")
    return 0
