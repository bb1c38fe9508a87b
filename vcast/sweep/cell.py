"""One cell of an experiment grid (model x task x method x ratio x frames) and where it lives.

``results/<experiment>/<model>/<frames>f/<method>/r<ratio>/<task>/`` (``<experiment>-clean/...``
under ``profile=clean``) holds lmms-eval's output
(``lmms_eval/``), the per-call efficiency records (``efficiency/``), the run log (``run.log``),
``cell.json`` (status, scores, efficiency, error) and, only when the cell is complete, ``DONE``
(:mod:`vcast.results.layout`; the record: :mod:`vcast.results.record`; read through
:mod:`vcast.results.tree`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

REPRODUCE = "reproduce"


@dataclass(frozen=True)
class CellSpec:
    """Everything one lmms-eval run needs; built from the composed Hydra config."""

    experiment: str
    model: str                    # config name, e.g. qwen3vl_8b
    plugin: str                   # lmms-eval model id, e.g. vcast_qwen3_vl
    pretrained: str
    prompt_key: str
    model_args: dict[str, Any]
    method: str                   # config name, e.g. vcast_official
    method_id: str                # registered method, e.g. vcast
    method_params: dict[str, Any]
    ratio: float
    frames: int
    task: str                     # config name, e.g. videomme
    lmms_tasks: list[str]
    batch_size: int = 1
    processes: int = 1
    limit: Optional[float] = None
    seed: int = 0
    include_paths: list[str] = field(default_factory=list)
    variant: str = "paper"        # the method's vcast.variants variant this cell ran
    profile: str = "reproduce"    # reproduce | clean (see vcast.sweep.profiles)

    @property
    def relative_dir(self) -> Path:
        return Path(experiment_folder(self.experiment, self.profile), self.model, f"{self.frames}f", self.method,
                    f"r{self.ratio:g}", self.task)

    @property
    def name(self) -> str:
        return "/".join(self.relative_dir.parts)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Spec fields that cannot change a cell's numbers: where it is filed, how many processes share it
# (data parallelism gives identical answers, tested), where extra task folders live.
NOT_IDENTITY = ("experiment", "model", "task", "processes", "include_paths")
# Model arguments that change what a run records, never what the model computes: a cell run with or
# without them is the same cell.
NOT_IDENTITY_MODEL_ARGS = ("record_kept",)


def identity_mismatch(recorded: CellSpec, spec: CellSpec) -> list[str]:
    """The fields of ``spec`` that differ from a finished cell's recorded spec (its record's
    ``spec``), as ``"name: recorded -> requested"``; empty when the cell answers this request.

    A field the record lacks (a cell from an older vcast) was read as its default (``variant``
    ``"paper"``, ``profile`` ``"reproduce"``). The model arguments of
    :data:`NOT_IDENTITY_MODEL_ARGS` (``record_kept``) are left out of ``model_args``.
    """
    differences = []
    for item in fields(CellSpec):
        if item.name in NOT_IDENTITY:
            continue
        before, now = getattr(recorded, item.name), getattr(spec, item.name)
        if item.name == "model_args":
            before, now = _identity_args(before), _identity_args(now)
        if _normalised(before) != _normalised(now):
            differences.append(f"{item.name}: {before!r} -> {now!r}")
    return differences


def cell_identity(spec: CellSpec) -> dict[str, Any]:
    """What decides whether answers can be reused for ``spec``: the fields :func:`identity_mismatch`
    compares, and a stamp of the checkpoint's files (:func:`checkpoint_stamp`), so a checkpoint
    rebuilt at the same path is another cell's. A resumable cell's response cache is fingerprinted
    with its digest (:func:`identity_digest`)."""
    out = {item.name: _normalised(getattr(spec, item.name)) for item in fields(CellSpec)
           if item.name not in NOT_IDENTITY}
    out["model_args"] = _identity_args(out["model_args"])
    out["checkpoint"] = checkpoint_stamp(spec.pretrained)
    return out


def identity_digest(identity: dict[str, Any]) -> str:
    """A short, stable digest of :func:`cell_identity` (sorted-key JSON, SHA-256, 16 hex digits)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def checkpoint_stamp(pretrained: str) -> str:
    """A local checkpoint folder's files (relative name, size, modification time), hashed; a Hub id
    as given (the Hub's files of an id do not change under a run)."""
    folder = Path(pretrained)
    if not folder.is_dir():
        return pretrained
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode("utf-8"))
    return "files:" + digest.hexdigest()[:16]


def _identity_args(args: Any) -> Any:
    """``args`` without the model arguments that are not part of a cell's identity."""
    if not isinstance(args, dict):
        return args
    return {key: value for key, value in args.items() if key not in NOT_IDENTITY_MODEL_ARGS}


def _normalised(value: Any) -> Any:
    """JSON round-trip form (tuples become lists, ints in floats compare equal)."""
    return json.loads(json.dumps(value, sort_keys=True))


def experiment_folder(experiment: str, profile: str) -> str:
    """``<experiment>`` for the reproduction profile, ``<experiment>-<profile>`` for another, so
    the two runs of one grid never share a cell."""
    return experiment if profile == REPRODUCE else f"{experiment}-{profile}"


def read_json(path: Path) -> Optional[Any]:
    """The JSON in ``path``, or None when there is none (or it is unreadable)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
