"""``SHA256SUMS`` of a checkpoint folder: written after training, checked before the demo uses it."""

from __future__ import annotations

import hashlib
from pathlib import Path

SUMS_NAME = "SHA256SUMS"


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def write_checksums(folder: Path) -> Path:
    """Write ``folder/SHA256SUMS`` (``sha256sum`` format) over every other file in ``folder``."""
    folder = Path(folder)
    lines = [f"{_digest(path)}  {path.name}\n" for path in sorted(folder.iterdir())
             if path.is_file() and path.name != SUMS_NAME]
    target = folder / SUMS_NAME
    target.write_text("".join(lines))
    return target


def checksum_problems(folder: Path) -> list[str]:
    """What differs from ``folder/SHA256SUMS`` (a changed, missing or unlisted file); ``[]``: all match."""
    folder = Path(folder)
    sums = folder / SUMS_NAME
    if not sums.is_file():
        return [f"{sums} is missing"]
    listed: dict[str, str] = {}
    for line in sums.read_text().splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    problems = [f"{name}: missing" for name in listed if not (folder / name).is_file()]
    problems += [f"{name}: checksum differs" for name, digest in listed.items()
                 if (folder / name).is_file() and _digest(folder / name) != digest]
    problems += [f"{path.name}: not listed" for path in sorted(folder.iterdir())
                 if path.is_file() and path.name != SUMS_NAME and path.name not in listed]
    return problems
