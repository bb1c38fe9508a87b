"""``cell.json``: the typed, versioned record of one cell, written by :func:`write_record` and read
by :func:`read_record`, nowhere else.

A sweep writes the record when an attempt ends (``ok``, ``failed``, ``oom``) or when a cell cannot
start (``failed``, attempt 0). :func:`vcast.sweep.execute.run_cell` also *returns* records it never
writes: ``skipped`` (finished with this very request), ``mismatch`` (finished with another),
``busy`` (another job holds the cell).

Versions: ``record_version`` 2 is the first typed record; a file without it was written by an
older vcast (version 1, the same fields without the version) and is read as such. A file from a
newer vcast, an unknown field or a value of the wrong type is refused with the field named
(:class:`~vcast.results.typed_json.RecordError`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from vcast.atomic_files import atomic_write_json
from vcast.results.layout import CELL_FILE, DONE_FILE
from vcast.results.typed_json import RecordError, from_json, to_json
from vcast.sweep.cell import CellSpec

RECORD_VERSION = 2
OLDEST_VERSION = 1  # cell.json of vcast before the typed record: the same fields, no version
FINISHED_STATUSES = ("ok", "failed", "oom")  # what a written record says


@dataclass(frozen=True)
class CellEfficiency:
    """A cell's efficiency summary (:func:`vcast.eval.efficiency.summarize`): sums over calls of
    the latencies (s), maxima of memory (MB), means per item of the token counts; ``None`` where
    the records lack a figure (older records, the vLLM plugin; a field a record from an older vcast
    lacks) or, for the wall time and throughput, where the cell finished over several attempts
    (``resumed_over`` says how many)."""

    items: Optional[int] = None
    calls: Optional[int] = None
    vision_latency_s: Optional[float] = None
    selection_latency_s: Optional[float] = None
    prefill_latency_s: Optional[float] = None
    generation_latency_s: Optional[float] = None
    generate_latency_s: Optional[float] = None
    prepare_latency_s: Optional[float] = None
    prepare_wait_s: Optional[float] = None
    total_latency_s: Optional[float] = None
    throughput_items_per_s: Optional[float] = None
    peak_memory_mb: Optional[float] = None
    memory_source: Optional[str] = None
    timer: Optional[str] = None
    mean_video_tokens_total: Optional[float] = None
    mean_video_tokens_kept: Optional[float] = None
    output_tokens: Optional[int] = None
    mean_video_tokens_final: Optional[float] = None
    layer_retention: Optional[float] = None
    vision_tflops_per_item: Optional[float] = None
    llm_tflops_per_item: Optional[float] = None
    prefill_tflops_per_item: Optional[float] = None
    per_task: dict[str, dict[str, float]] = field(default_factory=dict)
    resumed_over: Optional[int] = None

    def figures(self) -> dict[str, Any]:
        """The summary's scalar figures by name (every field but ``per_task``), in field order."""
        return {name: value for name, value in to_json(self).items() if name != "per_task"}


@dataclass(frozen=True)
class MissingVisuals:
    """Items whose video could not be read (answered empty): ``{task, doc_id, error}`` each."""

    count: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class AttemptEntry:
    """One attempt of a resumable cell (:func:`vcast.eval.resume.start_attempt`) and the items it
    computed (``computed``: those whose answer the cell reports)."""

    attempt: int
    started_at: Optional[str] = None
    answered_before: int = 0
    world_size: Optional[int] = None
    host: Optional[str] = None
    pid: Optional[int] = None
    slurm_job_id: Optional[str] = None
    set_aside: Optional[str] = None   # a cache of another request this attempt set aside, relative to the cell
    computed: int = 0


@dataclass(frozen=True)
class CellRecord:
    """What ``cell.json`` says of a cell: its request (``spec``), how its last attempt ended
    (``status``, ``error``, ``log_tail``), where lmms-eval's outputs are (relative to the cell),
    the scores and efficiency summary, and the account of its attempts."""

    cell: str                                     # the cell's path under the results root
    status: str                                   # ok | failed | oom (+ skipped | mismatch | busy returned)
    spec: CellSpec
    attempt: int = 0                              # the attempt that wrote the record (0: never started)
    error: Optional[str] = None
    log_tail: Optional[str] = None
    command: list[str] = field(default_factory=list)
    host: Optional[str] = None
    slurm_job_id: Optional[str] = None
    versions: dict[str, Optional[str]] = field(default_factory=dict)
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    duration_s: Optional[float] = None
    returncode: Optional[int] = None
    warm_start: bool = False
    set_aside: list[str] = field(default_factory=list)
    results_file: Optional[str] = None            # lmms-eval's *_results.json, relative to the cell
    samples_files: list[str] = field(default_factory=list)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)   # {lmms task: {metric: value}}
    n_samples: dict[str, Any] = field(default_factory=dict)
    missing_visuals: MissingVisuals = field(default_factory=MissingVisuals)
    efficiency: Optional[CellEfficiency] = None
    world_size: Optional[int] = None
    attempts: list[AttemptEntry] = field(default_factory=list)
    items_by_attempt: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # {attempt: {task: [doc]}}
    record_version: int = RECORD_VERSION

    def with_status(self, status: str) -> "CellRecord":
        """This record as :func:`vcast.sweep.execute.run_cell` returns it for ``status``."""
        return replace(self, status=status)

    def as_json(self) -> dict[str, Any]:
        """The record as ``cell.json`` holds it."""
        return to_json(self)


def record_from_json(data: Any, where: str = CELL_FILE) -> CellRecord:
    """``data`` (a parsed ``cell.json``) as a :class:`CellRecord`.

    Raises:
        RecordError: it is not a cell record, is from a newer vcast, or a field is wrong (named).
    """
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(data).__name__}")
    version = data.get("record_version", OLDEST_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < OLDEST_VERSION:
        raise RecordError(f"{where}: record_version {version!r} is not a version of cell.json")
    if version > RECORD_VERSION:
        raise RecordError(f"{where}: record_version {version} was written by a newer vcast (this one reads "
                          f"{OLDEST_VERSION}-{RECORD_VERSION}); upgrade vcast to read it")
    record = from_json(CellRecord, data, where)
    if record.status not in FINISHED_STATUSES:
        raise RecordError(f"{where}: status {record.status!r} is not one a cell is written with "
                          f"({', '.join(FINISHED_STATUSES)})")
    return replace(record, record_version=RECORD_VERSION) if version != RECORD_VERSION else record


def read_record(cell_dir: Path) -> Optional[CellRecord]:
    """``<cell_dir>/cell.json`` as a :class:`CellRecord`; None when there is none.

    Raises:
        RecordError: the file is not valid JSON or not a valid record (the message names the file
            and the field).
    """
    path = Path(cell_dir) / CELL_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise RecordError(f"{path}: unreadable ({error})") from error
    try:
        data = json.loads(text)
    except ValueError as error:
        raise RecordError(f"{path}: not JSON ({error})") from error
    return record_from_json(data, str(path))


def write_record(cell_dir: Path, record: CellRecord) -> None:
    """Write ``record`` as ``<cell_dir>/cell.json`` (atomically: a reader sees the old or the new one),
    then, when its status is ``ok``, the done marker (``DONE``, holding ``finished_at``)."""
    if record.status not in FINISHED_STATUSES:
        raise ValueError(f"a cell record is written with status {', '.join(FINISHED_STATUSES)}, not {record.status!r}")
    atomic_write_json(Path(cell_dir) / CELL_FILE, record.as_json())
    if record.status == "ok":
        (Path(cell_dir) / DONE_FILE).write_text(f"{record.finished_at or ''}\n")


def clear_record(cell_dir: Path) -> None:
    """Remove ``<cell_dir>``'s record and done marker (an attempt starting over an earlier one's folder)."""
    for name in (CELL_FILE, DONE_FILE):
        (Path(cell_dir) / name).unlink(missing_ok=True)
