"""The repository's own local checkpoints, the make target that builds each, and a clear error for a
local checkpoint folder that is missing (instead of transformers' "couldn't connect to the Hub").

A fresh clone holds only the trained demo model; the tiny random-weight checkpoints the examples
and tests use are built by ``make tiny-checkpoints`` (:mod:`vcast.tiny_checkpoints`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from vcast.families import all_families

REPO = Path(__file__).resolve().parents[1]
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # owner/name, as the Hugging Face Hub names a model
# Repository folder -> the make target that (re)builds it (Makefile: tiny-checkpoints, demo-vllm, demo-model).
BUILT_BY = {
    **{family.tiny_dir: "make tiny-checkpoints" for family in all_families()},
    "checkpoints/tiny_qwen3_vl_vllm": "make demo-vllm",
    "checkpoints/demo_qwen3_vl": "make demo-model",
}


def build_command(candidates: list[Path]) -> Optional[str]:
    """The make target that builds one of ``candidates`` (a repository folder of :data:`BUILT_BY`), or None."""
    for candidate in candidates:
        for folder, command in BUILT_BY.items():
            if Path(os.path.abspath(candidate)) == REPO / folder:
                return command
    return None


def missing_local_checkpoint(pretrained: str, cwd: Optional[Path] = None) -> Optional[str]:
    """Why ``pretrained``, meant as a local folder, cannot be loaded (missing, with the make target
    that builds it where the repository has one), or None: it exists, or it is a Hub id
    (``owner/name``) for transformers to fetch or find in its cache."""
    given = Path(os.path.expanduser(pretrained))
    path = given if given.is_absolute() else Path(cwd or Path.cwd()) / given
    if path.exists():
        return None
    built = build_command([path])
    looks_local = given.is_absolute() or pretrained.startswith((".", "~")) or not HUB_ID.fullmatch(pretrained)
    if built is None and not looks_local:
        return None
    return f"pretrained {pretrained!r}: no such folder {path}" + (f"; build it with {built}" if built else "")


def check_local_checkpoint(pretrained: str) -> None:
    """ValueError with :func:`missing_local_checkpoint`'s reason; a plugin calls it before loading."""
    problem = missing_local_checkpoint(pretrained)
    if problem is not None:
        raise ValueError(problem)
