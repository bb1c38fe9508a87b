"""Where a kit run ran: the card, driver, versions and commit, for ``environment.json``."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import torch

REPOSITORY = Path(__file__).resolve().parents[2]


def _run(command: list[str], cwd: Optional[Path] = None) -> Optional[str]:
    """stdout of ``command`` (stripped), or None when it is missing or fails."""
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit() -> str:
    """``$VCAST_COMMIT``, else ``git rev-parse HEAD`` (``-dirty`` with uncommitted changes) where
    the repository has its ``.git``, else ``unknown`` (a copied working tree)."""
    given = os.environ.get("VCAST_COMMIT", "").strip()
    if given:
        return given
    if not (REPOSITORY / ".git").exists():
        return "unknown"
    head = _run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY)
    if head is None:
        return "unknown"
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPOSITORY)
    return f"{head}-dirty" if status else head


def nvidia_smi() -> Optional[dict[str, str]]:
    """The first card's name and driver from ``nvidia-smi``, or None where it is not installed."""
    out = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if not out:
        return None
    name, _, driver = out.splitlines()[0].rpartition(",")
    return {"name": name.strip(), "driver": driver.strip()}


def _version(module: str) -> Optional[str]:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001 - a missing or broken optional package is just "not there"
        return None


def describe(device: torch.device, dtype: torch.dtype, mode: str) -> dict[str, Any]:
    """JSON-ready facts about this run's machine and software."""
    import transformers

    info: dict[str, Any] = {
        "mode": mode,
        "device": str(device),
        "dtype": str(dtype).removeprefix("torch."),
        "commit": commit(),
        "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "accelerate": _version("accelerate"),
        "numpy": _version("numpy"),
        "vcast": _version("vcast"),
        "card": None,
        "card_memory_gib": None,
        "compute_capability": None,
        "driver": None,
        "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
    }
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        info.update(card=properties.name, card_memory_gib=round(properties.total_memory / 2**30, 1),
                    compute_capability=f"{properties.major}.{properties.minor}")
    smi = nvidia_smi()
    if smi is not None:
        info["driver"] = smi["driver"]
        info["card"] = info["card"] or smi["name"]
    return info
