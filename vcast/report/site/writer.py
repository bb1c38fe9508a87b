"""The results site's output folder, written incrementally and atomically: each file only when
its fingerprint (its inputs' size and mtime, the data it shows, the site code's version) differs
from the last build's manifest (``.site-manifest.json``) or the file was changed since; each write
to a temporary name, then renamed; what the last build wrote and this one did not, deleted last."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from vcast.atomic_files import atomic_write_bytes, atomic_write_text

MANIFEST = ".site-manifest.json"


def _stat(path: Path) -> list[Any]:
    try:
        st = Path(path).stat()
    except OSError:
        return [str(path), None, None]
    return [str(path), st.st_size, st.st_mtime_ns]


class SiteWriter:
    """Writes the site's files, each only when its fingerprint (inputs' size and mtime, the data
    shown, this code's version) differs from the manifest's or the file was changed since."""

    def __init__(self, out: Path, version: str) -> None:
        self.out = Path(out)
        self.version = version
        self.previous = self._read_manifest()
        self.entries: dict[str, dict[str, Any]] = {}
        self.written: list[str] = []
        self.unchanged: list[str] = []
        self.removed: list[str] = []

    def _read_manifest(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads((self.out / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        files = data.get("files") if isinstance(data, dict) else None
        return files if isinstance(files, dict) else {}  # another version's: its fingerprints differ, its files go

    def fingerprint(self, inputs: Sequence[Path], key: Any) -> str:
        text = json.dumps({"version": self.version, "key": key, "inputs": [_stat(p) for p in inputs]}, sort_keys=True,
                          default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _current(self, rel: str, fingerprint: str) -> Optional[dict[str, Any]]:
        """The manifest entry of ``rel`` when the file on disk is what that build wrote for
        this fingerprint, else None."""
        entry = self.previous.get(rel)
        if not entry or entry.get("fingerprint") != fingerprint:
            return None
        _, size, mtime = _stat(self.out / rel)
        return entry if (size, mtime) == (entry.get("size"), entry.get("mtime_ns")) else None

    def _record(self, rel: str, fingerprint: str, changed: bool, note: str = "") -> None:
        _, size, mtime = _stat(self.out / rel)
        self.entries[rel] = {"fingerprint": fingerprint, "size": size, "mtime_ns": mtime, "note": note}
        (self.written if changed else self.unchanged).append(rel)

    def produce(self, rel: str, inputs: Sequence[Path], key: Any, make: Callable[[Path], Optional[str]]) -> str:
        """Make the file ``rel`` with ``make(path)`` (which writes it atomically and may return a
        note, kept in the manifest) unless it is current; returns the note."""
        if rel in self.entries:
            return str(self.entries[rel].get("note", ""))
        fingerprint = self.fingerprint(inputs, key)
        entry = self._current(rel, fingerprint)
        if entry is not None:
            self._record(rel, fingerprint, False, str(entry.get("note", "")))
            return str(entry.get("note", ""))
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        note = make(path) or ""
        self._record(rel, fingerprint, True, note)
        return note

    def text(self, rel: str, inputs: Sequence[Path], key: Any, render: Callable[[], str]) -> None:
        """A text file: ``render()`` (a function of ``key`` and the files ``inputs`` only)."""
        self.produce(rel, inputs, key, lambda path: atomic_write_text(path, render()))

    def copy(self, rel: str, source: Path) -> None:
        """A copy of ``source``."""
        self.produce(rel, [source], "copy", lambda path: atomic_write_bytes(path, Path(source).read_bytes()))

    def finish(self) -> None:
        """Delete what earlier builds wrote and this one did not (after every page that could
        link to it was rewritten), then write the manifest (when it changed)."""
        for rel in sorted(set(self.previous) - set(self.entries)):
            path = self.out / rel
            if path.is_file():
                path.unlink()
                self.removed.append(rel)
            folder = path.parent
            while folder != self.out and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent
        text = json.dumps({"version": self.version, "files": self.entries}, indent=1, sort_keys=True) + "\n"
        try:
            same = (self.out / MANIFEST).read_text(encoding="utf-8") == text
        except OSError:
            same = False
        if not same:
            atomic_write_text(self.out / MANIFEST, text)
