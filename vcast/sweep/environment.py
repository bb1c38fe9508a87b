"""What a sweep needs from the machine, checked before any job starts: the model checkpoints and
the benchmark data (so a typo fails in seconds, not after a model download or a SLURM queue).

* ``pretrained``: a local folder (relative paths resolve against the folder the command runs in,
  then against the vcast repository) that holds a ``config.json``; else a Hugging Face Hub id
  (``owner/name``) that is in the local Hub cache, or, when online, that the Hub knows.
* Task data: the folders a task config lists under ``data`` (``configs/task/*.yaml``), relative to
  ``HF_HOME`` (where lmms-eval's task code reads the videos) or to the vcast package.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Optional

from vcast.checkpoint_paths import HUB_ID, build_command

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).resolve().parents[1]
HUB_TIMEOUT_S = 10.0


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` as huggingface_hub reads it."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def hf_home() -> Path:
    """``HF_HOME`` (default ``~/.cache/huggingface``), read now (lmms-eval's tasks read it at import)."""
    return Path(os.path.expanduser(os.environ.get("HF_HOME", "~/.cache/huggingface")))


def hub_cache() -> Path:
    return Path(os.path.expanduser(os.environ.get("HF_HUB_CACHE", str(hf_home() / "hub"))))


def local_candidates(path: str, cwd: Optional[Path] = None) -> list[Path]:
    """Where a relative ``path`` may live: the current folder, then the vcast repository (once,
    when the two are the same folder)."""
    given = Path(os.path.expanduser(path))
    if given.is_absolute():
        return [given]
    here = Path(cwd or Path.cwd()) / given
    return [here] if here.resolve() == (REPO / given).resolve() else [here, REPO / given]


def resolve_pretrained(path: str, cwd: Optional[Path] = None) -> str:
    """The absolute local folder ``path`` names, or ``path`` unchanged (a Hub id, or missing)."""
    for candidate in local_candidates(path, cwd):
        if candidate.exists():
            return str(candidate.resolve())
    return path


def pretrained_problem(path: str, cwd: Optional[Path] = None) -> Optional[str]:
    """Why ``path`` cannot be loaded as a checkpoint, or None when it can (as far as can be told
    without loading it)."""
    candidates = local_candidates(path, cwd)
    for candidate in candidates:
        if candidate.is_dir():
            return None if (candidate / "config.json").is_file() else f"{candidate} holds no config.json"
        if candidate.exists():
            return f"{candidate} is not a folder"
    tried = " or ".join(str(c) for c in candidates)
    built = build_command(candidates)
    if built is not None:
        return f"pretrained {path!r} not found (tried {tried}): build it with {built}"
    if not HUB_ID.fullmatch(path) or ".." in path:
        return f"pretrained {path!r} not found (tried {tried})"
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(path, "config.json", cache_dir=hub_cache()), str):
        return None
    if hub_offline():
        return (f"pretrained {path!r} is neither a local folder (tried {tried}) nor in the Hugging Face cache "
                f"{hub_cache()} (HF_HUB_OFFLINE is set: download it first, or point HF_HOME at the cache)")
    return _hub_problem(path, tried)


def _hub_problem(repo_id: str, tried: str) -> Optional[str]:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(repo_id, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        return f"pretrained {repo_id!r} is gated on the Hugging Face Hub: request access and log in (`hf auth login`)"
    except RepositoryNotFoundError:
        return (f"pretrained {repo_id!r} is neither a local folder (tried {tried}) nor a model on the Hugging Face "
                "Hub (or it is private: log in with `hf auth login`)")
    except Exception as error:  # network errors of every kind
        return (f"pretrained {repo_id!r} is neither a local folder (tried {tried}) nor in the Hugging Face cache "
                f"{hub_cache()}, and the Hub is unreachable ({type(error).__name__}: {str(error)[:200]})")
    return None


def data_paths(task_data: Optional[Mapping[str, Any]]) -> list[Path]:
    """The absolute paths a task config's ``data`` node lists (``root``: ``hf_home`` or ``vcast``)."""
    if not task_data:
        return []
    root = str(task_data.get("root", "hf_home"))
    if root not in ("hf_home", "vcast"):
        raise ValueError(f"task data root must be 'hf_home' or 'vcast', got {root!r}")
    base = hf_home() if root == "hf_home" else PACKAGE
    return [base / os.path.expanduser(str(p)) for p in task_data.get("paths") or []]


def data_problem(task: str, task_data: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Why task ``task`` has no data here (a listed path missing or empty), or None."""
    missing = [p for p in data_paths(task_data) if not p.exists() or (p.is_dir() and not any(p.iterdir()))]
    if not missing:
        return None
    hint = (task_data or {}).get("hint")
    return (f"task {task!r}: data not found: {', '.join(str(p) for p in missing)}"
            + (f" ({hint})" if hint else ""))
