"""Run one cell: skip it when finished, else run lmms-eval in a subprocess into a staging folder
and swap the whole folder into place at the end.

* A finished cell (``DONE`` + ``status == "ok"`` + its results file) is skipped.
* Everything is written into ``.<task>.staging-resumable`` beside the cell and renamed over it at
  the end, so the cell folder is always a complete old or complete new attempt.
* **Resume** (``resume=True``, the default): the staging folder keeps lmms-eval's response cache
  (``cache/``, see :mod:`vcast.eval.resume`), which every answer reaches as soon as it exists. A
  killed run (preemption, time limit, Ctrl-C) leaves the staging folder; the next attempt goes on
  in it and computes only the items not yet answered. A failed cell's folder is moved back into
  staging for its retry. The efficiency records of every attempt stay (each carries its attempt);
  ``cell.json`` lists the attempts and which items each computed. ``resume=False`` sets earlier
  partial work aside (``.<task>.set-aside-<time>``) and starts afresh.
* A failing run (a crash, CUDA OOM, a bad video) still swaps in a cell with ``cell.json``
  ``status`` ``"failed"`` or ``"oom"``, the error and the log tail, and no ``DONE``; the sweep
  goes on and the next sweep retries it.
* A POSIX lock (released by the OS if the process dies) keeps two jobs from running the same
  cell at once (two sweeps, or two grid points that name one cell such as vanilla at r=1).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional, TextIO

from vcast.atomic_files import atomic_write_json, swap_in_dir
from vcast.eval.efficiency import latest_first, record_items, summarize
from vcast.eval.missing_visuals import read_missing
from vcast.eval.resume import read_attempts, set_aside
from vcast.eval.run import SUMMARY_FILE
from vcast.ports import free_port
from vcast.results.layout import CACHE_DIR, EFFICIENCY_DIR, IDENTITY_FILE, LMMS_EVAL_DIR, RUN_LOG
from vcast.results.record import AttemptEntry, CellEfficiency, CellRecord, MissingVisuals, clear_record, write_record
from vcast.results.tree import Cell, lmms_eval_outputs, work_dir
from vcast.results.typed_json import from_json
from vcast.sweep.cell import CellSpec, cell_identity, identity_digest, identity_mismatch, read_json
from vcast.sweep.progress_relay import ProgressRelay
from vcast.sweep.warm_start import WARM_STARTS

logger = logging.getLogger(__name__)

OOM_MARKERS = ("CUDA out of memory", "OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED")
LOG_TAIL_CHARS = 4000
PUMP_JOIN_S = 30.0  # after the child ends, how long its output may still take to drain


def format_model_args(args: dict[str, Any]) -> str:
    """lmms-eval's ``k=v,k2=v2``; lists and tuples as JSON (commas inside brackets are kept)."""
    parts = []
    for key, value in args.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = json.dumps(list(value)).replace(" ", "")
        elif isinstance(value, bool):
            value = str(value).lower()
        text = str(value)
        if "," in text and not text.startswith(("[", "{")):
            raise ValueError(f"model argument {key}={text!r} contains a comma, which lmms-eval cannot parse")
        parts.append(f"{key}={text}")
    return ",".join(parts)


def failure_status(log: str) -> str:
    """``"oom"`` when the run died of running out of GPU memory, else ``"failed"``."""
    return "oom" if any(marker in log for marker in OOM_MARKERS) else "failed"


# The last line of a Python traceback: "ValueError: ...", "torch.OutOfMemoryError: ...".
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::\s.*)?$")
CAUSE_CHARS = 500


def failure_cause(log: str) -> Optional[str]:
    """The exception that ended a run, from its log (the last traceback's last line, without the
    lines a chained traceback adds after it), or None when the log names none."""
    lines = [line.strip() for line in log.splitlines()]
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith("Traceback (most recent call last)"):
            for line in lines[index + 1:]:
                if _EXCEPTION_LINE.match(line):
                    return line[:CAUSE_CHARS]
            break
    found = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return found[-1][:CAUSE_CHARS] if found else None


def eval_command(spec: CellSpec, output: Path, python: str = sys.executable,
                 identity: Optional[str] = None) -> tuple[list[str], dict[str, str]]:
    """The lmms-eval run of ``spec`` into ``output`` (which must be its working folder: the records,
    ``efficiency/`` and ``kept/``, and the response cache, ``cache/``, are named relative to it, so
    the model arguments, part of the cache's fingerprint, do not change when the folder moves) and
    the environment variables it needs on top of ours; under ``accelerate launch`` (torchrun, one
    process per GPU) when it has several processes. ``identity``: the cell's identity digest, for
    the response cache's fingerprint."""
    model_args = {"pretrained": spec.pretrained, "method": spec.method_id, "ratio": spec.ratio,
                  "max_num_frames": spec.frames, **spec.model_args, **spec.method_params,
                  "efficiency_dir": EFFICIENCY_DIR}
    args = ["-m", "vcast.eval.run", "--model", spec.plugin, "--model_args", format_model_args(model_args),
            "--tasks", ",".join(spec.lmms_tasks), "--output_path", str(output / "lmms_eval"),
            "--prompt_key", spec.prompt_key, "--batch_size", str(spec.batch_size), "--seed", str(spec.seed),
            "--use_cache", CACHE_DIR]
    if identity is not None:
        args += ["--cache_identity", identity]
    for path in spec.include_paths:
        args += ["--include_path", str(path)]
    if spec.limit is not None:
        args += ["--limit", str(spec.limit)]
    if spec.processes <= 1:
        return [python, *args], {}
    launch = [python, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(spec.processes),
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
              "--main_process_port", str(free_port())]
    # Without GPUs (tests), the same torchrun launch with gloo: accelerate's own --cpu flag would
    # need MPI instead.
    extra_env = {} if _has_cuda() else {"ACCELERATE_USE_CPU": "true"}
    return [*launch, *args], extra_env


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


class CellLock:
    """Non-blocking exclusive ``lockf`` on ``<parent>/.<task>.lock`` (works on NFS); the holder
    writes who it is into the file (host, pid, SLURM job, since when), for :func:`lock_holder`."""

    def __init__(self, cell_dir: Path) -> None:
        self.path = lock_path(cell_dir)
        self._handle: Optional[Any] = None
        self._since = ""

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._handle = handle
        self._since = time.strftime('%Y-%m-%d %H:%M:%S')
        self.describe()
        return True

    def describe(self, attempt: Optional[int] = None) -> None:
        """Write who holds the lock (and, once known, the ``attempt`` it runs) into the lock file."""
        if self._handle is None:
            return
        job = _slurm_job_id()
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(f"host {socket.gethostname()}, pid {os.getpid()}" + (f", SLURM job {job}" if job else "")
                           + (f", attempt {attempt}" if attempt is not None else "") + f", since {self._since}\n")
        self._handle.flush()

    def release(self) -> None:
        if self._handle is not None:
            fcntl.lockf(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def lock_path(cell_dir: Path) -> Path:
    return cell_dir.parent / f".{cell_dir.name}.lock"


def lock_holder(cell_dir: Path) -> Optional[str]:
    """Who holds ``cell_dir``'s lock now (``host ..., pid ..., SLURM job ..., since ...``; ``a live
    job`` when it wrote nothing), or None when no live job does."""
    path = lock_path(cell_dir)
    if not path.is_file():
        return None
    with open(path, "a+") as handle:
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            return handle.read().strip() or "a live job"
        fcntl.lockf(handle, fcntl.LOCK_UN)
        return None


def run_cell(spec: CellSpec, results_root: Path, *, env: Optional[dict[str, str]] = None,
             timeout_s: Optional[float] = None, rerun_mismatched: bool = False,
             console: Optional[TextIO] = None, resume: bool = True) -> CellRecord:
    """Run ``spec`` unless it is finished; return its record (status ``ok``,
    ``failed``, ``oom``, ``skipped`` when already finished with this very request, ``mismatch``
    when the finished cell answers another request (limit, params, variant, model args...; see
    :func:`vcast.sweep.cell.identity_mismatch`) and ``rerun_mismatched`` is off, or ``busy`` when
    another job holds it). ``console``: where lmms-eval's progress bars are shown as the cell
    runs (its whole output always goes to ``run.log``). ``resume``: go on from the answers an
    interrupted or failed attempt left (see the module docstring); False: set them aside."""
    cell_dir = Path(results_root) / spec.relative_dir
    finished = _finished_answer(spec, cell_dir, rerun_mismatched)
    if finished is not None:
        return finished
    lock = CellLock(cell_dir)
    if not lock.acquire():
        holder = lock_holder(cell_dir) or "another job"
        logger.warning("%s: busy: %s is running this cell; not run twice", spec.name, holder)
        return CellRecord(cell=spec.name, status="busy", spec=spec, error=f"running in {holder}")
    try:
        finished = _finished_answer(spec, cell_dir, rerun_mismatched)  # another job may have finished it
        if finished is not None:
            return finished
        return _run_locked(spec, cell_dir, env, timeout_s, console, resume, lock)
    finally:
        lock.release()


def _finished_answer(spec: CellSpec, cell_dir: Path, rerun_mismatched: bool) -> Optional[CellRecord]:
    """The record to return without running: ``skipped`` when the finished cell answers exactly
    this request, ``mismatch`` when it answers another (unless ``rerun_mismatched``); None to run."""
    cell = Cell(cell_dir)
    if not cell.is_complete:
        return None
    record = cell.record
    assert record is not None  # a complete cell has one
    differences = identity_mismatch(record.spec, spec)
    if not differences:
        logger.info("%s: already finished, skipped", spec.name)
        return record.with_status("skipped")
    if rerun_mismatched:
        logger.warning("%s: the finished cell answers another request (%s); running it again over it",
                       spec.name, "; ".join(differences))
        return None
    error = (f"a finished cell answers another request ({'; '.join(differences)}); not reused. Run with "
             "rerun_mismatched=true to replace it, or another results_root / experiment to keep both")
    logger.error("%s: %s", spec.name, error)
    return CellRecord(cell=spec.name, status="mismatch", spec=spec, error=error)


def record_failure(spec: CellSpec, results_root: Path, error: str) -> CellRecord:
    """Record a cell that cannot start (e.g. its method is not implemented) without running it."""
    cell = Cell(Path(results_root) / spec.relative_dir)
    if cell.is_complete:
        assert cell.record is not None
        return cell.record.with_status("skipped")
    record = CellRecord(cell=spec.name, status="failed", attempt=0, spec=spec, error=error,
                        host=socket.gethostname(), finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    write_record(cell.path, record)
    logger.error("%s: not run: %s", spec.name, error)
    return record


def _set_aside(path: Path, cell_dir: Path, why: str) -> Path:
    aside = set_aside(path, f".{cell_dir.name}")
    logger.warning("%s: %s; set aside as %s", cell_dir.name, why, aside)
    return aside


def _working_folder(spec: CellSpec, cell_dir: Path, resume: bool, identity: dict[str, Any]) -> tuple[Path, list[str]]:
    """The folder this attempt runs in, with what earlier attempts left when resuming, and notes on
    what was set aside. Staging folders of older vcast versions (``.staging-<id>``) hold nothing
    reusable and are deleted, as are the left-overs of an interrupted swap."""
    for pattern in (f".{cell_dir.name}.staging-*", f".{cell_dir.name}.old-*"):
        for stale in cell_dir.parent.glob(pattern):
            if stale.name != work_dir(cell_dir).name:
                logger.info("%s: removing %s left by an interrupted run", spec.name, stale.name)
                shutil.rmtree(stale, ignore_errors=True)
    work = work_dir(cell_dir)
    notes = []
    if not work.exists() and cell_dir.exists() and not Cell(cell_dir).is_complete:
        os.replace(cell_dir, work)  # a failed attempt's folder: its answers are reused
    if work.exists() and not resume:
        notes.append(f"resume=false: earlier partial work set aside as {_set_aside(work, cell_dir, 'resume=false')}")
    recorded = read_json(work / CACHE_DIR / IDENTITY_FILE)
    if work.exists() and recorded is not None and recorded != identity:
        changed = sorted(key for key in set(recorded) | set(identity) if recorded.get(key) != identity.get(key))
        why = f"its response cache answers another request ({', '.join(changed)} differ)"
        notes.append(f"{why}: set aside as {_set_aside(work, cell_dir, why)}")
    # An earlier attempt's outputs and verdict: this attempt writes its own (its answers are cached).
    shutil.rmtree(work / LMMS_EVAL_DIR, ignore_errors=True)
    for temporary in work.rglob(".*.tmp"):  # an atomic write a kill cut short (vcast.atomic_files)
        temporary.unlink(missing_ok=True)
    clear_record(work)
    (work / CACHE_DIR).mkdir(parents=True, exist_ok=True)
    atomic_write_json(work / CACHE_DIR / IDENTITY_FILE, identity)
    return work, notes


def _run_locked(spec: CellSpec, cell_dir: Path, env: Optional[dict[str, str]],
                timeout_s: Optional[float], console: Optional[TextIO], resume: bool, lock: CellLock) -> CellRecord:
    identity = cell_identity(spec)
    work, notes = _working_folder(spec, cell_dir, resume, identity)
    attempt = len(read_attempts(work / CACHE_DIR)) + 1
    lock.describe(attempt)  # status names this attempt from now on, before the run records it
    command, extra_env = eval_command(spec, work, identity=identity_digest(identity))
    run_env = {**(os.environ if env is None else env), **extra_env}
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    logger.info("%s: running (attempt %d): %s", spec.name, attempt, " ".join(command))
    start = time.perf_counter()
    relay = ProgressRelay(console, prefix=f"{spec.name}: ")
    header = f"=== {spec.name}: attempt {attempt}, {started_at} ===\n"
    returncode, error, warm = _run_subprocess(command, work / RUN_LOG, run_env, timeout_s, relay, header=header,
                                              may_start_warm=env is None and not extra_env)
    duration_s = time.perf_counter() - start
    finished_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if (work / CACHE_DIR).is_dir() and not (work / CACHE_DIR / IDENTITY_FILE).is_file():
        # the run set a cache of another request aside (its identity stamp with it) and began anew
        atomic_write_json(work / CACHE_DIR / IDENTITY_FILE, identity)
    log_tail = _tail(work / RUN_LOG)
    outputs: dict[str, Any] = {}
    if returncode == 0 and error is None:
        try:
            outputs = _collect(work)
        except (OSError, ValueError, KeyError) as collect_error:
            error = f"lmms-eval finished but its outputs are incomplete: {collect_error}"
    status, failure = "ok", {}
    if not outputs:
        status = failure_status(log_tail)
        cause = failure_cause(log_tail)
        failure = {"error": (error or f"lmms-eval exited with code {returncode}") + (f": {cause}" if cause else ""),
                   "log_tail": log_tail}
    attempts, items_by_attempt = attempts_record(work)
    record = CellRecord(
        cell=spec.name, status=status, spec=spec, attempt=attempt, command=command, host=socket.gethostname(),
        slurm_job_id=_slurm_job_id(), versions=_versions(), started_at=started_at, finished_at=finished_at,
        duration_s=duration_s, returncode=returncode, warm_start=warm, set_aside=notes, attempts=attempts,
        items_by_attempt=items_by_attempt, **outputs, **failure)
    write_record(work, record)
    swap_in_dir(work, cell_dir)
    level = logging.INFO if record.status == "ok" else logging.ERROR
    logger.log(level, "%s: %s in %.1f s%s", spec.name, record.status, duration_s,
               "" if record.status == "ok" else f" ({record.error}; log: {cell_dir / RUN_LOG})")
    return record


def attempts_record(work: Path) -> tuple[list[AttemptEntry], dict[str, dict[str, list[int]]]]:
    """The record's account of the attempts: ``attempts`` (each one's start, host, job, answers
    it found and items it computed) and ``items_by_attempt``
    (``{attempt: {task: [doc ids]}}``, from the efficiency records, each item under the last
    attempt that computed it, the one whose answer the cell reports)."""
    attempts = read_attempts(work / CACHE_DIR)
    owner = item_attempts(Cell(work).efficiency())
    by_attempt: dict[str, dict[str, list[int]]] = {}
    for (task, doc_id), number in sorted(owner.items(), key=lambda item: (str(item[1]), item[0])):
        by_attempt.setdefault(str(number), {}).setdefault(task, []).append(doc_id)
    counts = {str(number): sum(len(docs) for docs in tasks.values()) for number, tasks in by_attempt.items()}
    listed = [from_json(AttemptEntry, {**entry, "computed": counts.get(str(entry.get("attempt")), 0)},
                        f"{CACHE_DIR}/attempts.jsonl")
              for entry in attempts]
    return listed, by_attempt


def _run_subprocess(command: list[str], log_path: Path, env: Optional[dict[str, str]],
                    timeout_s: Optional[float], relay: ProgressRelay, header: str = "",
                    may_start_warm: bool = False) -> tuple[Optional[int], Optional[str], bool]:
    """Run ``command`` in ``log_path``'s folder with its output appended to ``log_path`` after
    ``header`` (earlier attempts' logs stay above it) and its progress bars shown by ``relay``;
    ``(return code, None, warm)``, or ``(None, why, warm)`` when it could not start or timed out.
    ``may_start_warm``: ``command`` runs in this process's environment, so it may be forked from
    the warm-start server (:mod:`vcast.sweep.warm_start`; ``warm`` says whether it was).

    The child stays in the sweep's process group, so Ctrl-C (and a kill of the group) reaches it
    and everything it started; on Ctrl-C it gets a few seconds' grace, then it is killed. The
    output is drained for at most ``PUMP_JOIN_S`` after the child ends: ``accelerate launch``
    workers left by a timeout may hold the pipe open, and the sweep must not wait for them."""
    with log_path.open("ab") as log:
        log.write(header.encode("utf-8"))
        log.flush()
        process: Any = WARM_STARTS.start(command, log_path.parent) if may_start_warm else None
        warm = process is not None
        try:
            if process is None:
                process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                           cwd=str(log_path.parent))
        except OSError as error:
            return None, f"could not start {command[0]}: {error}", warm
        pump = threading.Thread(target=_pump, args=(process.stdout, log, relay), daemon=True)
        pump.start()
        try:
            _raise_pending_interrupt()  # a Ctrl-C held back while the child was being started
            process.wait(timeout=timeout_s)
            _raise_pending_interrupt()  # ... which the child may have died of: an interrupt, not a failure
        except subprocess.TimeoutExpired:
            _stop(process, grace_s=0)
            return None, f"timed out after {timeout_s} s", warm
        except KeyboardInterrupt:  # the child got the same SIGINT from the terminal
            _stop(process, grace_s=5)
            raise
        finally:
            pump.join(timeout=PUMP_JOIN_S)
            relay.close()
    return process.returncode, None, warm


def _raise_pending_interrupt() -> None:
    """Raise the KeyboardInterrupt that the sweep's SIGINT handler holds back while the main
    thread starts a process (``vcast.sweep.__main__.Interrupts.raise_pending``); nothing under any
    other handler."""
    pending = getattr(signal.getsignal(signal.SIGINT), "raise_pending", None)
    if pending is not None:
        pending()


def _pump(stream: Any, log: Any, relay: ProgressRelay) -> None:
    """Copy the child's output to the log as it comes (a killed run keeps its last words)."""
    while True:
        chunk = stream.read1(65536)
        if not chunk:
            return
        try:
            log.write(chunk)
            log.flush()
        except ValueError:  # the log was closed: the run ended and stopped waiting for stragglers
            return
        relay.feed(chunk)


def _stop(process: Any, grace_s: float) -> None:
    """Wait ``grace_s`` for the child to end, then kill it."""
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def item_attempts(records: list[dict[str, Any]]) -> dict[tuple[str, int], Optional[int]]:
    """``{(task, doc id): attempt}``: the last attempt whose records computed each item."""
    owner: dict[tuple[str, int], Optional[int]] = {}
    for record in latest_first(records):
        for item in record_items(record):
            owner.setdefault(item, record.get("attempt"))
    return owner


def _collect(staging: Path) -> dict[str, Any]:
    """Scores from lmms-eval's results file, efficiency from the records and the run summary."""
    results_files, samples_files = lmms_eval_outputs(staging)
    if len(results_files) != 1:
        raise ValueError(f"expected one *_results.json under lmms_eval/, found {len(results_files)}")
    results = json.loads(results_files[0].read_text(encoding="utf-8"))
    scores = {
        task: {key.split(",")[0]: value for key, value in metrics.items()
               if key.endswith(",none") and "_stderr" not in key and isinstance(value, (int, float))}
        for task, metrics in results.get("results", {}).items()
    }
    summary = json.loads((staging / LMMS_EVAL_DIR / SUMMARY_FILE).read_text(encoding="utf-8"))
    samples = [str(path.relative_to(staging)) for path in samples_files]
    missing = read_missing(staging / "efficiency")
    items = sum(int(n.get("effective", n.get("original", 0))) if isinstance(n, dict) else int(n)
                for n in results.get("n-samples", {}).values())
    if missing and len(missing) >= items:
        raise ValueError(f"every item's video was unreadable ({len(missing)}; first: {missing[0]['error']})")
    return {
        "missing_visuals": MissingVisuals(count=len(missing), items=missing),
        "results_file": str(results_files[0].relative_to(staging)),
        "samples_files": samples,
        "scores": scores,
        "n_samples": results.get("n-samples", {}),
        "efficiency": _efficiency(staging),
        "world_size": summary["world_size"],
    }


def _efficiency(staging: Path) -> CellEfficiency:
    """The cell's efficiency summary over every attempt's records, each item counted once, from
    the last attempt that computed it (its answer is the one reported). The wall time and the
    throughput are the finishing attempt's only when it computed every item; a cell finished over
    several attempts has no wall time of one evaluation (None; ``resumed_over`` says how many)."""
    records = Cell(staging).efficiency()
    computing = {r.get("attempt") for r in records}
    summary = json.loads((staging / LMMS_EVAL_DIR / SUMMARY_FILE).read_text(encoding="utf-8"))
    wall = summary["wall_s"] if len(computing) <= 1 and summary.get("attempt") in computing else None
    out = summarize(latest_first(records), wall)
    if wall is None and records:
        out["resumed_over"] = len(computing)
    return from_json(CellEfficiency, out, "efficiency summary")


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL_CHARS))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _versions() -> dict[str, Optional[str]]:
    """Installed versions of the packages that compute a cell's numbers (recorded, not compared)."""
    from importlib import metadata

    found: dict[str, Optional[str]] = {}
    for package in ("vcast", "torch", "transformers", "lmms_eval", "flash_attn"):
        try:
            found[package] = metadata.version(package.replace("_", "-"))
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def _slurm_job_id() -> Optional[str]:
    array = os.environ.get("SLURM_ARRAY_JOB_ID")
    if array:
        return f"{array}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    return os.environ.get("SLURM_JOB_ID")
