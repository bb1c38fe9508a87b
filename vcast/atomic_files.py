"""Writes that are all-or-nothing: a reader sees the old file or folder, or the new one, never
half of one (a killed process leaves at most a hidden temporary beside it)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def swap_in_dir(new: Path, dest: Path) -> None:
    """Rename the finished folder ``new`` to ``dest`` (same parent folder).

    An existing ``dest`` is first renamed aside to ``.<name>.old-<id>`` and deleted once ``new`` is
    in place; if the final rename fails, it is put back rather than left hidden.
    """
    old = None
    if dest.exists():
        old = dest.parent / f".{dest.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(dest, old)
    try:
        os.replace(new, dest)
    except BaseException:
        if old is not None and not dest.exists():
            os.replace(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def folder_in_place(dest: Path) -> Iterator[Path]:
    """A new, empty folder beside ``dest`` to fill: on a clean exit it replaces ``dest``
    (:func:`swap_in_dir`); on any error it is deleted and ``dest`` stays as it was."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would otherwise become the folder's mode
    try:
        yield tmp
        swap_in_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
