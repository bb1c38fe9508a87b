"""A generated block of a docs page: the text between two marker lines, rewritten by a command and
held equal to its source by a test (the method table of ``docs/baselines.md``, the family table of
``docs/models.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional


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
