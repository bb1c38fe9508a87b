"""Item-level resume through lmms-eval's own response cache (``simple_evaluate(use_cache=...)``,
``lmms_eval.caching.response_cache.ResponseCache`` of lmms-eval 0.7.3).

lmms-eval keeps each deterministic answer under a key of (request type, task, doc, generation
arguments, prompt hash, task config hash, model fingerprint), in SQLite with a JSON-lines journal
that is appended and fsynced before each upsert. Three things make it a resume journal for a cell:

* **Each answer reaches it when it exists.** lmms-eval writes a run's answers only after the
  model's ``generate_until`` has returned all of them (the end of the run), and its ``CacheHook``
  is a no-op. The plugins call :func:`store_answers` after each batch instead: it writes through
  the very cache object that is evaluating (:func:`calling_response_cache`), with lmms-eval's own
  write path (``ResponseCache.execute`` on the answered requests).
* **Every attempt sees every earlier attempt's answers.** Each attempt writes into its own
  ``runs/<run id>/rank_<r>.db`` (+ journal), and reads only its own rank's file and the merged
  ``cache.db``; a killed attempt is never merged. :func:`consolidate`, before an attempt starts,
  replays each earlier run's journal into its database (an answer killed between the fsync and the
  upsert) and merges them all into ``cache.db`` with lmms-eval's ``merge_shards``, so a resumed
  run sees them whatever its number of processes.
* **A cache answers only its own cell.** The model fingerprint in every key is
  ``f"{model}|{model_args}"``; vcast's plugins print as their class and the cell's identity
  (:func:`vcast.eval.plugin.VCastLMM.__repr__`), and :func:`check_fingerprint` sets a cache whose
  recorded fingerprint differs aside before the run (it would never be hit, and would hide that
  the cell starts afresh).

The cache folder also holds ``attempts.jsonl`` (one line per attempt: when, where, how many items
were answered before it); each rank's plugin keeps ``progress.rank<r>.json`` (items to compute,
computed) beside its efficiency records.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import sqlite3
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from vcast.atomic_files import atomic_write_json
from vcast.eval.efficiency import read_jsonl

logger = logging.getLogger(__name__)

ATTEMPTS_FILE = "attempts.jsonl"
ROOT_DB = "cache.db"
ROOT_AUDIT = "cache.audit.jsonl"
RUNS_DIR = "runs"
SET_ASIDE_MARK = ".set-aside-"
# lmms-eval copies a scratch database back to the cache folder every N answers when the folder is
# on a network file system (NFS, Lustre: the usual cluster home); 1 keeps a preemption from
# losing more than the answer being written.
CHECKPOINT_INTERVAL_ENV = "LMMS_CACHE_CHECKPOINT_INTERVAL"
# How far up the stack the evaluating ResponseCache may be: its execute() calls the model directly.
_CALLER_DEPTH = 4


def model_fingerprint(model: Any, model_args: str) -> str:
    """The model fingerprint lmms-eval's ``ResponseCache.create`` records and keys with, for the
    model object (or name) ``model`` run with the ``model_args`` string."""
    from lmms_eval.utils import simple_parse_args_string

    parsed = simple_parse_args_string(model_args)
    return f"{model}|" + json.dumps(parsed, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)


def _databases(root: Path) -> list[Path]:
    return [path for path in [root / ROOT_DB, *sorted(root.glob(f"{RUNS_DIR}/*/rank_*.db"))] if path.is_file()]


def _read_only(path: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30))


def _settle(database: Path, tries: int = 100) -> None:
    """Move everything of ``database`` into its main file and leave write-ahead logging: lmms-eval
    opens the merged database ``immutable=1``, which reads the main file alone, so answers still in
    a ``-wal`` file (left when a reader, e.g. ``status``, held it at the last close) are unseen."""
    for _ in range(tries):
        try:
            with contextlib.closing(sqlite3.connect(database, timeout=30)) as db:
                busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if not busy and db.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete":
                    return
        except sqlite3.OperationalError as error:
            # A reader with it open (``status``, a progress poll) lets the checkpoint through but not the
            # change of journal mode, which raises at once: wait for it to close, as for a busy checkpoint.
            if "locked" not in str(error) and "busy" not in str(error):
                raise
        time.sleep(0.1)
    raise RuntimeError(f"could not checkpoint {database}: another process keeps reading it")


def recorded_fingerprints(root: Path) -> dict[str, str]:
    """``{database: model fingerprint}`` of every database of the cache at ``root`` that records one."""
    found = {}
    for path in _databases(Path(root)):
        try:
            with _read_only(path) as db:
                row = db.execute("SELECT value FROM meta WHERE key = 'model_fingerprint'").fetchone()
        except sqlite3.Error as error:
            logger.warning("response cache %s is unreadable (%s)", path, error)
            found[str(path)] = f"<unreadable: {error}>"
            continue
        if row is not None:
            found[str(path)] = row[0]
    return found


def set_aside(path: Path, stem: str) -> Path:
    """Rename ``path`` to ``<stem>.set-aside-<time>-<unique>`` beside it (kept, never deleted); the new path."""
    aside = path.with_name(f"{stem}{SET_ASIDE_MARK}{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}")
    os.replace(path, aside)
    return aside


def check_fingerprint(root: Path, fingerprint: str) -> Optional[Path]:
    """Set the cache at ``root`` aside (renamed to ``<root>.set-aside-<time>``) when a database in it
    records another model fingerprint than ``fingerprint``; where it went, or None when it matches
    (or there is none)."""
    root = Path(root)
    others = {path: found for path, found in recorded_fingerprints(root).items() if found != fingerprint}
    if not others:
        return None
    path, found = next(iter(others.items()))
    aside = set_aside(root, root.name)
    logger.warning("the response cache %s answers another request: %s records fingerprint %.300s, this run is "
                   "%.300s. It is set aside as %s and the run starts afresh", root, path, found, fingerprint, aside)
    return aside


def consolidate(root: Path) -> int:
    """Merge every earlier run of the cache at ``root`` (finished, failed or killed) into its
    ``cache.db`` and journal, then delete those runs; the number of answers ``cache.db`` then holds.

    Run it while no process of the cell runs (rank 0, before the others open the cache)."""
    from lmms_eval.caching.response_cache import ResponseCache

    root = Path(root)
    runs = sorted(path for path in (root / RUNS_DIR).glob("*") if path.is_dir() and not path.name.startswith("."))
    for run in runs:
        databases = sorted({*run.glob("rank_*.db"),
                            *(path.with_name(path.name.replace(".audit.jsonl", ".db"))
                              for path in run.glob("rank_*.audit.jsonl"))})
        for database in databases:
            _recover(database, database.with_suffix(".audit.jsonl"))
        if databases:
            ResponseCache.merge_shards([str(path) for path in databases], str(root / ROOT_DB))
        journals = sorted(run.glob("rank_*.audit.jsonl"))
        if journals:
            ResponseCache.merge_audit_logs([str(path) for path in journals], str(root / ROOT_AUDIT))
        shutil.rmtree(run)
        logger.info("response cache: merged run %s into %s", run.name, root / ROOT_DB)
    if (root / ROOT_DB).is_file():
        _settle(root / ROOT_DB)
    return answered(root)


def _recover(database: Path, journal: Path) -> None:
    """Bring a rank's database up to its journal (lmms-eval replays the journal when it opens one:
    an answer fsynced there but not yet upserted, killed in between, is recovered; a torn last line
    is skipped). A database that is no database any more (a copy cut short, on a network file
    system) is rebuilt from the journal alone."""
    from lmms_eval.caching.response_cache import ResponseCache

    try:
        ResponseCache(db_path=str(database), audit_path=str(journal)).close()
    except sqlite3.DatabaseError as error:
        logger.warning("response cache %s is unreadable (%s): rebuilt from its journal %s", database, error, journal)
        for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
            path.unlink(missing_ok=True)
        ResponseCache(db_path=str(database), audit_path=str(journal)).close()


def answered(root: Path) -> int:
    """How many answers the cache at ``root`` holds: in its merged database, its runs' databases
    and their journals (an answer journaled by a killed run counts: :func:`consolidate` recovers it)."""
    root = Path(root)
    keys: set[str] = set()
    for path in _databases(root):
        try:
            with _read_only(path) as db:
                keys.update(row[0] for row in db.execute("SELECT cache_key FROM responses"))
        except sqlite3.Error:
            continue
    for journal in root.glob(f"{RUNS_DIR}/*/rank_*.audit.jsonl"):
        with journal.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a torn line: lmms-eval's replay skips it too
                if entry.get("cache_key") and entry.get("deterministic", True):
                    keys.add(entry["cache_key"])
    return len(keys)


@dataclass(frozen=True)
class Attempt:
    """One attempt of a cache's run: its number (1, 2, ...) and the answers the cache held before it."""

    number: int
    answered_before: int


def read_attempts(root: Path) -> list[dict[str, Any]]:
    """The attempts recorded in ``<root>/attempts.jsonl`` (a torn last line is skipped)."""
    return read_jsonl(root, ATTEMPTS_FILE)


def start_attempt(root: Path, fingerprint: Optional[str], world_size: int) -> tuple[Attempt, Optional[Path]]:
    """Before an attempt (rank 0, alone): set a cache of another ``fingerprint`` aside (None: no
    check), merge the earlier runs and record the attempt; ``(the attempt, where a mismatched cache
    went or None)``."""
    root = Path(root)
    aside = check_fingerprint(root, fingerprint) if root.exists() and fingerprint is not None else None
    root.mkdir(parents=True, exist_ok=True)
    before = consolidate(root)
    number = len(read_attempts(root)) + 1
    line = {"attempt": number, "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "answered_before": before,
            "world_size": world_size, "host": socket.gethostname(), "pid": os.getpid(),
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
            # beside the cache, named relative to the folder holding both: a sweep's working folder
            # becomes the cell's folder when the attempt ends, so an absolute path would go stale
            "set_aside": None if aside is None else aside.name}
    with (root / ATTEMPTS_FILE).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    logger.info("response cache %s: attempt %d, %d answer(s) already there", root, number, before)
    return Attempt(number, before), aside


def calling_response_cache() -> Any:
    """The lmms-eval ``ResponseCache`` whose ``execute`` called the model method that calls this,
    or None (no ``use_cache``, or the model was called directly)."""
    from lmms_eval.caching.response_cache import ResponseCache

    frame = sys._getframe(1)
    for _ in range(_CALLER_DEPTH):
        frame = frame.f_back
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, ResponseCache):
            return owner
    return None


class _Answered:
    """A stand-in model for ``ResponseCache.execute``: it 'generates' the answers already made, for
    whichever of the requests the cache does not hold yet (a data-parallel rank's padding repeats a
    request whose answer may be in already)."""

    def __init__(self, requests: Sequence[Any], texts: Sequence[str]) -> None:
        self._texts = {id(request): text for request, text in zip(requests, texts)}

    def generate_until(self, requests: list[Any]) -> list[str]:
        return [self._texts[id(request)] for request in requests]


def store_answers(cache: Any, requests: Sequence[Any], texts: Sequence[str]) -> None:
    """Write the answers ``texts`` of the lmms-eval ``requests`` (Instances) into ``cache`` now,
    through its own write path (journal + fsync, then SQLite); nothing when ``cache`` is None."""
    if cache is None or not requests:
        return
    cache.execute(_Answered(requests, texts), "generate_until", list(requests))


class Progress:
    """One rank's progress in an attempt, in ``<directory>/progress.rank<r>.json`` (rewritten
    atomically after each batch): ``{attempt, to_compute, computed}``; ``directory=None``: nothing
    written."""

    def __init__(self, directory: Optional[Path], rank: int, attempt: Optional[int], to_compute: int) -> None:
        self.path = None if directory is None else Path(directory) / f"progress.rank{rank}.json"
        self.state = {"attempt": attempt, "to_compute": to_compute, "computed": 0}
        self._write()

    def add(self, items: int) -> None:
        self.state["computed"] += items
        self._write()

    def _write(self) -> None:
        if self.path is not None:
            atomic_write_json(self.path, {**self.state, "updated_at": time.time()})


def cell_progress(root: Path, progress_dir: Path) -> Optional[tuple[int, Optional[int], int]]:
    """``(answered, total, attempts)`` of the cache at ``root`` for ``status``: the answers it
    holds, what the latest attempt's ranks said (in ``progress_dir``) they had to compute on top of
    those it started with (None until they said), and how many attempts started; None when there
    is no cache."""
    root = Path(root)
    attempts = read_attempts(root)
    if not attempts:
        return None
    latest = attempts[-1]
    ranks = []
    for path in sorted(Path(progress_dir).glob("progress.rank*.json")):
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if state.get("attempt") == latest.get("attempt"):
            ranks.append(state)
    done = answered(root)
    if not ranks:
        return done, None, len(attempts)
    total = int(latest.get("answered_before", 0)) + sum(int(state["to_compute"]) for state in ranks)
    return done, total, len(attempts)
