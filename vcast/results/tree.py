"""The one reader of a results tree: :class:`ResultsTree` finds the cells, :class:`Cell` reads each
one's files (its record, lmms-eval's results and samples, the kept-token and efficiency records,
the attempts).

A *cell folder* is ``<experiment>/<model>/<frames>f/<method>/r<ratio>/<task>/`` under a results
root; it exists once a sweep wrote its ``cell.json``, or holds only a hidden working folder beside
it (``.<task>.staging-resumable``) while an attempt runs or after one was killed. Folders under a
dot-name (working folders, Hydra's ``.hydra``) are never cells themselves.

Readers of per-line records are tolerant: a torn last line (its writer killed mid-line) is skipped
with a warning, as a results page must show a killed cell. Whole files that are wrong raise
:class:`CellFileError` (or :class:`~vcast.results.typed_json.RecordError` for the record) naming the
file, so a caller can list the cell as a problem and go on with the others.
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence

from vcast.eval.efficiency import read_json_lines, read_jsonl
from vcast.results.layout import (CACHE_DIR, CELL_FILE, DONE_FILE, EFFICIENCY_DIR, EFFICIENCY_RECORDS, KEPT_DIR,
                                  KEPT_RECORDS, LMMS_EVAL_DIR, RUN_LOG)
from vcast.results.record import AttemptEntry, CellRecord, read_record

if TYPE_CHECKING:
    from vcast.kept_records import KeptRecord

WORK_SUFFIX = "staging-resumable"  # .<task>.staging-resumable: the working folder a cell's attempts share
SAMPLES_NAME = re.compile(r"_samples_(?P<task>.+)\.jsonl$")  # lmms-eval's <date>_samples_<lmms task>.jsonl


class CellFileError(ValueError):
    """A file of a cell that is missing or not what it should be; the message names it."""


class Cell:
    """One cell folder and its files (see the module docstring). ``rel``: its path under the tree's
    root, '/'-separated. Nothing is read until asked; the record is read once."""

    def __init__(self, path: Path, root: Optional[Path] = None) -> None:
        self.path = Path(path)
        self.root = Path(root) if root is not None else self.path
        self.rel = self.path.relative_to(self.root).as_posix() if root is not None else self.path.name

    def __repr__(self) -> str:
        return f"Cell({self.rel!r})"

    # The record -------------------------------------------------------------------------------

    @cached_property
    def record(self) -> Optional[CellRecord]:
        """The cell's record; None when it has none (planned, or running its first attempt).

        Raises:
            RecordError: the record is unreadable or invalid (the message names the field).
        """
        return read_record(self.path)

    def readable_record(self) -> Optional[CellRecord]:
        """The record, or None when there is none or it is invalid (a listing of cells shows such
        a cell as unreadable, and :attr:`record` says why, rather than failing)."""
        try:
            return self.record
        except ValueError:
            return None

    @property
    def record_path(self) -> Path:
        """Where the record is (for a build's fingerprint; read it through :attr:`record`)."""
        return self.path / CELL_FILE

    @property
    def done(self) -> bool:
        """The done marker is present (written last, only after an ``ok`` record)."""
        return (self.path / DONE_FILE).is_file()

    def why_incomplete(self) -> Optional[str]:
        """Why this is not a finished cell, or None when it is (the done marker, a record with
        status ``ok`` and its results file all present). An invalid record is a reason too."""
        if not self.done:
            return f"no {DONE_FILE} marker"
        try:
            record = self.record
        except ValueError as error:
            return f"{CELL_FILE} invalid ({error})"
        if record is None:
            return f"{CELL_FILE} missing"
        if record.status != "ok":
            return f"status {record.status!r}"
        if not record.results_file or not (self.path / record.results_file).is_file():
            return f"results file {record.results_file!r} is missing"
        return None

    @property
    def is_complete(self) -> bool:
        return self.why_incomplete() is None

    # lmms-eval's outputs ----------------------------------------------------------------------

    def results(self) -> dict[str, Any]:
        """lmms-eval's ``*_results.json`` of the finished run (the record's ``results_file``).

        Raises:
            CellFileError: no record names one, or it is missing or not JSON.
        """
        record = self.record
        if record is None or not record.results_file:
            raise CellFileError(f"{self.rel}: no results file recorded")
        path = self.path / record.results_file
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as error:
            raise CellFileError(f"results file {record.results_file} is missing") from error
        except ValueError as error:
            raise CellFileError(f"{path.name}: not JSON ({error})") from error
        if not isinstance(data, dict):
            raise CellFileError(f"{path.name}: not a JSON object")
        return data

    def scores(self) -> dict[str, dict[str, float]]:
        """``{lmms task: {metric: value}}`` as recorded (empty without a record)."""
        record = self.record
        return dict(record.scores) if record is not None else {}

    def sample_files(self) -> dict[str, Path]:
        """``{lmms task: its samples file}`` in the order the record lists them (empty without a record).

        Raises:
            CellFileError: a listed file is missing or not named as lmms-eval names samples files.
        """
        record = self.record
        out: dict[str, Path] = {}
        for name in (record.samples_files if record is not None else []):
            path = self.path / name
            match = SAMPLES_NAME.search(path.name)
            if match is None:
                raise CellFileError(f"{path.name}: not an lmms-eval samples file name (*_samples_<task>.jsonl)")
            if not path.is_file():
                raise CellFileError(f"samples file {name} is missing")
            out[match.group("task")] = path
        return out

    def samples(self, lmms_task: Optional[str] = None) -> dict[str, list[dict[str, Any]]]:
        """``{lmms task: its samples records}`` (of ``lmms_task`` only when given), the first record of
        each ``doc_id`` in file order (a data-parallel run may repeat a padded document).

        Raises:
            CellFileError: a samples file is missing, misnamed, or has a line that is not JSON.
        """
        out = {}
        for task, path in self.sample_files().items():
            if lmms_task is None or task == lmms_task:
                try:
                    out[task] = first_per_doc(read_json_lines(path, strict=True))
                except ValueError as error:
                    raise CellFileError(str(error)) from error
        return out

    # vcast's own records ----------------------------------------------------------------------

    def efficiency(self) -> list[dict[str, Any]]:
        """Every rank's per-call efficiency records (:class:`vcast.eval.efficiency.CallRecord` as
        JSON), files in name order; a torn last line is skipped."""
        return read_efficiency(self.path / EFFICIENCY_DIR)

    def efficiency_files(self) -> list[Path]:
        return sorted((self.path / EFFICIENCY_DIR).glob(EFFICIENCY_RECORDS))

    def kept(self, lmms_task: Optional[str] = None) -> dict[tuple[str, int, int], KeptRecord]:
        """``{(lmms task, doc_id, video): kept-token record}`` (of ``lmms_task`` only when given); a later
        record of the same key wins (a rerun); a torn last line is skipped."""
        # imported here: the format module brings numpy and the model families, which the sweep and
        # status, reading only records, never need
        from vcast.kept_records import from_json as kept_from_json

        out: dict[tuple[str, int, int], KeptRecord] = {}
        for data in read_jsonl(self.path / KEPT_DIR, KEPT_RECORDS):
            if lmms_task is None or data.get("task") == lmms_task:
                record = kept_from_json(data)
                out[(record.task, record.doc_id, record.video)] = record
        return out

    def kept_files(self) -> list[Path]:
        return sorted((self.path / KEPT_DIR).glob(KEPT_RECORDS))

    def attempts(self) -> list[AttemptEntry]:
        """The attempts of a resumable cell as its record lists them (empty without a record)."""
        record = self.record
        return list(record.attempts) if record is not None else []

    def log_tail(self, lines: int) -> str:
        """The last ``lines`` lines of the run log (empty when there is none)."""
        try:
            text = (self.path / RUN_LOG).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def input_files(self) -> list[Path]:
        """The files a page of this cell is drawn from (for a build's fingerprint)."""
        return [self.record_path, self.path / DONE_FILE, self.path / RUN_LOG, *self.efficiency_files()]

    # The working folder of a running or killed attempt ----------------------------------------

    @property
    def work_dir(self) -> Path:
        """The hidden working folder of this cell's attempts (swapped in when one ends)."""
        return work_dir(self.path)

    @property
    def staged(self) -> bool:
        """An attempt is running or was killed: a working folder exists (this vcast's, or an older
        one's ``.<task>.staging-<id>``, which the next attempt removes)."""
        return any(self.path.parent.glob(f".{self.path.name}.staging-*"))

    @property
    def work_cache(self) -> Path:
        return self.work_dir / CACHE_DIR

    @property
    def work_efficiency(self) -> Path:
        return self.work_dir / EFFICIENCY_DIR


def read_efficiency(directory: Path) -> list[dict[str, Any]]:
    """The per-call efficiency records of every rank in an efficiency folder (a cell's
    ``efficiency/``, or the ``efficiency_dir`` a run was given), files in name order; a torn last
    line is skipped."""
    return read_jsonl(directory, EFFICIENCY_RECORDS)


def lmms_eval_outputs(folder: Path) -> tuple[list[Path], list[Path]]:
    """(``*_results.json`` files, ``*_samples_<lmms task>.jsonl`` files) lmms-eval wrote under
    ``<folder>/lmms_eval``, each sorted: what a new record names (``results_file``,
    ``samples_files``)."""
    outputs = Path(folder) / LMMS_EVAL_DIR
    return sorted(outputs.rglob("*_results.json")), sorted(outputs.rglob("*_samples_*.jsonl"))


def work_dir(cell_dir: Path) -> Path:
    """The working folder of ``cell_dir``'s attempts (hidden beside it until swapped in)."""
    return cell_dir.parent / f".{cell_dir.name}.{WORK_SUFFIX}"


class ResultsTree:
    """A results root (or one experiment's folder of it) and the cells under it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def cell(self, relative: str | Path) -> Cell:
        return Cell(self.root / relative, self.root)

    def cells(self, *, staged: bool = False, extra: Sequence[str] = ()) -> list[Cell]:
        """The cells under the root with a record, sorted by path; ``staged``: also those with only a
        working folder (running, or killed before their first record); ``extra``: also these
        relative paths (planned cells, which may not exist yet)."""
        found = {path.parent for path in self.root.rglob(CELL_FILE) if self._visible(path.parent)}
        if staged:
            for staging in self.root.rglob(".*.staging-*"):
                if staging.is_dir() and self._visible(staging.parent):
                    found.add(staging.parent / staging.name[1:].split(".staging-")[0])
        found.update(self.root / name for name in extra)
        return [Cell(path, self.root) for path in sorted(found)]

    def __iter__(self) -> Iterator[Cell]:
        return iter(self.cells())

    def _visible(self, path: Path) -> bool:
        """Not inside a hidden folder (``.hydra``, a working folder of a running or killed attempt)."""
        return not any(part.startswith(".") for part in path.relative_to(self.root).parts)


def first_per_doc(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first record of each ``doc_id`` (records without one are all kept), in order."""
    seen: dict[Any, dict[str, Any]] = {}
    for number, record in enumerate(records):
        seen.setdefault(record.get("doc_id", f"#{number}"), record)
    return list(seen.values())
