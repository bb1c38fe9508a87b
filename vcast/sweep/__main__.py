"""``python -m vcast.sweep experiment=<name> -m``: run an experiment's grid, one cell per Hydra job.

Without ``-m`` it runs the single cell the overrides describe (``model=... task=... method=...
ratio=... frames=...``). ``hydra/launcher=slurm_h100`` submits the cells to SLURM (a job array),
``hydra/launcher=local`` runs them as local processes through submitit; the default runs them
one after another in this process. ``dry_run=true`` prints the jobs (and the sbatch script)
without running anything (:mod:`vcast.sweep.plan`). See ``configs/README.md``.

Exit codes: 0 all cells ok or skipped; 1 a cell was invalid, failed, ran out of memory or was
refused as a mismatch; 2 the sweep stopped before any job: a name typed wrong (a key, config,
variant or parameter: :mod:`vcast.sweep.names`, with the closest spellings), an override that
nothing would read (:mod:`vcast.sweep.overrides`), or pre-flight (a missing checkpoint or
dataset); 130 interrupted (Ctrl-C).

Ctrl-C (SIGINT) ends the sweep with one line on stderr and exit code 130 whenever it comes: during
pre-flight, inside a cell (its lmms-eval child, in the sweep's process group, gets the same SIGINT
and a few seconds to stop before it is killed), between two cells, during the summary, or in
Python's atexit callbacks after the sweep (it then exits at once, skipping the rest). Finished
cells are kept. :class:`Interrupts` does this: the first SIGINT becomes the KeyboardInterrupt that
ends the sweep and later ones are ignored (a wrapper that forwards Ctrl-C to its child sends two;
the second would land in the first one's cleanup or in an atexit callback, with a traceback). The
KeyboardInterrupt waits while the main thread is inside Hydra or OmegaConf (a config left half
changed fails the cleanup with another error: a traceback and exit 1), swaps a cell folder in or
starts a child process, and is raised as soon as the thread is out of them (milliseconds). It is
installed before this module imports Hydra (``import vcast``, which ``python -m`` runs first, loads
nothing heavy), so a Ctrl-C while the imports load ends the same way. Out of its reach: the
interpreter's own start-up (tens of milliseconds), and the end of Python's shutdown after the
atexit callbacks, where SIGINT's default kills the process (a shell shows exit status 130).

A SIGINT that the sweep inherits as ignored stays ignored, by the sweep and its lmms-eval children,
as Python itself leaves it: a shell without job control starts ``sweep &`` so, meaning the
terminal's Ctrl-C not to reach background jobs. Stop such a sweep by killing its process group
(``kill -- -<pgid>``); the cell it was running is redone next time.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Optional

INTERRUPTED = ("interrupted: finished cells are kept; the cell that was running kept its answered items in its "
               "staging folder. Run the same command again to resume (only the missing items are computed).")
RETRY_S = 0.02  # how soon a KeyboardInterrupt that had to wait looks again where the main thread is
# Code a KeyboardInterrupt would leave half-done. Packages: Hydra, OmegaConf and the libraries they
# call (the innermost code outside the standard library is theirs). Functions: anywhere on the stack.
_WAIT_IN_PACKAGES = frozenset({"hydra", "omegaconf", "antlr4", "yaml", "attr", "packaging"})
_WAIT_IN_FUNCTIONS = frozenset({("vcast.atomic_files", "swap_in_dir"), ("subprocess", "_execute_child"),
                                ("vcast.sweep.warm_start", "start_child")})


def _half_done(frame: Optional[FrameType]) -> bool:
    """Whether the main thread, at ``frame``, is in code that a KeyboardInterrupt would leave
    half-done (``_WAIT_IN_PACKAGES``, ``_WAIT_IN_FUNCTIONS``). Hydra's frames further out (its
    launcher calling a job, a callback) do not count: there it is running the sweep's own code."""
    innermost: Optional[str] = None
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if (module, frame.f_code.co_name) in _WAIT_IN_FUNCTIONS:
            return True
        if innermost is None and module.partition(".")[0] not in sys.stdlib_module_names:
            innermost = module
        frame = frame.f_back
    return innermost is not None and innermost.partition(".")[0] in _WAIT_IN_PACKAGES


class Interrupts:
    """The sweep's SIGINT handler (see the module docstring). :func:`run` raises KeyboardInterrupt
    through it between :meth:`arm` and :meth:`disarm`, and reports once in :meth:`close`."""

    def __init__(self, previous: Any = None, active: bool = True) -> None:
        self.previous = previous  # restored by close(); None: kept through Python's shutdown
        self.active = active      # False: SIGINT is not ours (ignored, or not the main thread)
        self.received = False     # a SIGINT came
        self.armed = False        # it may become a KeyboardInterrupt now (run()'s work, until raised)
        self.closed = False       # run() has settled its exit code
        self.reported = False     # ... and printed the line
        self._retrying = False
        self._lock = threading.Lock()  # no retry signal once closed
        self._main = threading.main_thread().ident

    @classmethod
    def install(cls, for_process: bool = False) -> "Interrupts":
        """The SIGINT handler of this sweep: the process's own (``python -m vcast.sweep``), else a new
        one, restored to the previous handler by :meth:`close` unless ``for_process``; inactive where
        SIGINT is ignored (inherited so: left so) or this is not the main thread."""
        current = signal.getsignal(signal.SIGINT)
        if isinstance(current, cls):
            return current
        if current in (signal.SIG_IGN, None) or threading.current_thread() is not threading.main_thread():
            return cls(active=False)
        handler = cls(previous=None if for_process else current)
        signal.signal(signal.SIGINT, handler)
        return handler

    def __call__(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.closed:
            if self.previous is None:  # Python is shutting down: leave now, not from an atexit callback
                self._exit_now()
            self.received = True
            return
        self.received = True
        if not self.armed:  # raised already (one Ctrl-C, one unwinding), or run() will report it
            return
        if _half_done(frame):
            self._retry_soon()
            return
        self.armed = False
        raise KeyboardInterrupt

    def arm(self) -> None:
        """run()'s work begins: a SIGINT raises KeyboardInterrupt from now on (one that came already, here)."""
        if self.active:
            self.armed = True
            if self.received:
                self.armed = False
                raise KeyboardInterrupt

    def raise_pending(self) -> None:
        """Raise now an interrupt that is waiting for the main thread to leave code it must not
        cut (see :func:`_half_done`): the cell runner calls it once its child has started and once
        it has ended, so a child that the same Ctrl-C stopped is never recorded as a failed cell."""
        if self.armed and self.received:
            self.armed = False
            raise KeyboardInterrupt

    def disarm(self) -> None:
        """run()'s work is over: a SIGINT is only recorded, for :meth:`close` to report."""
        self.armed = False

    def close(self, code: int) -> int:
        """run()'s exit code: 130, with the one line, once interrupted; ``code`` otherwise."""
        self.armed = False
        self.closed = True  # from here a SIGINT is the shutdown's (__call__)
        with self._lock:
            pass
        if self.received:
            code = 130
        if code == 130 and not self.reported:
            self.reported = True
            print(INTERRUPTED, file=sys.stderr)
        if self.active and self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        return code

    def _retry_soon(self) -> None:
        if not self._retrying:
            self._retrying = True
            timer = threading.Timer(RETRY_S, self._retry)
            timer.daemon = True
            timer.start()

    def _retry(self) -> None:
        """Deliver the waiting interrupt again, to the main thread (a blocking call there returns for it)."""
        with self._lock:
            self._retrying = False
            if self.armed and not self.closed:
                signal.pthread_kill(self._main, signal.SIGINT)

    def _exit_now(self) -> None:
        try:
            if not self.reported:
                self.reported = True
                print(INTERRUPTED, file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # a stream closed already, or in use by the code interrupted: leave all the same
            pass
        os._exit(130)


if __name__ == "__main__":  # before the imports below: a Ctrl-C while they load ends the sweep cleanly too
    Interrupts.install(for_process=True)  # run() uses it; it stays for Python's shutdown

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from vcast.sweep.slurm_job import ignore_time_limit_signal, rename_slurm_job  # noqa: E402
from vcast.sweep.spec import preflight, spec_from_config  # noqa: E402

logger = logging.getLogger("vcast.sweep")

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "configs")


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="sweep")
def main(cfg: DictConfig) -> dict[str, Any]:
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import to_absolute_path

    from vcast.sweep.execute import record_failure, run_cell
    from vcast.sweep.grid import experiment_of

    if cfg.logger not in ("none", "wandb"):
        raise ValueError(f"logger must be 'none' or 'wandb', got {cfg.logger!r}")
    experiment = experiment_of(cfg, HydraConfig.get().runtime.choices)
    results_root = Path(to_absolute_path(cfg.results_root))
    try:
        spec = spec_from_config(cfg, experiment)
    except ValueError as error:  # a bad grid point: record it and let the sweep go on
        logger.error("invalid cell: %s", error)
        return _report({"status": "invalid", "error": str(error)})
    rename_slurm_job(spec.name)
    problem = preflight(spec)
    if problem is not None:
        record = record_failure(spec, results_root, problem)
    else:
        timeout = None if cfg.timeout_min is None else float(cfg.timeout_min) * 60
        console = sys.stderr if sys.stderr.isatty() else None  # lmms-eval's progress bars, when someone watches
        record = run_cell(spec, results_root, timeout_s=timeout, rerun_mismatched=bool(cfg.rerun_mismatched),
                          console=console, resume=bool(cfg.get("resume", True)))
    ignore_time_limit_signal()  # the cell is settled: a requeue from here would find it done
    if cfg.logger == "wandb" and record.status in ("ok", "failed", "oom"):
        from vcast.sweep.wandb_log import log_cell

        wandb_cfg = OmegaConf.to_container(cfg.wandb, resolve=True)
        log_cell(record, project=wandb_cfg["project"], mode=wandb_cfg["mode"], entity=wandb_cfg.get("entity"),
                 directory=results_root / experiment / "wandb")
    logger.info("%s: %s", spec.name, record.status)
    return _report({"cell": spec.name, "status": record.status, "error": record.error or ""})


def _report(outcome: dict[str, Any]) -> dict[str, Any]:
    """Hand the job's outcome to the sweep summary (the sweep folder is shared by every job)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from vcast.sweep.progress import progress_line
    from vcast.sweep.summary import record_outcome

    runtime = HydraConfig.get()
    output = Path(runtime.runtime.output_dir)
    directory = output.parent if runtime.mode == RunMode.MULTIRUN else output
    record_outcome(directory, outcome)
    line = progress_line(directory, outcome)
    if line is not None:
        logger.info("%s", line)
    return outcome


def run(argv: list[str]) -> int:
    """The command line's entry point: the dry run, or the sweep; its exit code (130 once interrupted,
    whatever the sweep had got to; see the module docstring)."""
    from vcast.sweep.names import refusals
    from vcast.sweep.plan import dry_run, requested
    from vcast.sweep.summary import exit_code

    interrupts = Interrupts.install()
    try:
        try:
            interrupts.arm()
            unread = refusals(argv)
            # before Hydra, whose advice for an unknown key ("use +key=") runs a cell that ignores it, and
            # whose answer to an unknown config is its search path and every config of the group
            if unread:
                for problem in unread:
                    print(f"refused: {problem}", file=sys.stderr)
                print(f"no cell was started: {len(unread)} override(s) refused", file=sys.stderr)
                code = 2
            elif requested(argv):
                code = dry_run(argv)
            else:
                main()
                code = exit_code()
        finally:
            interrupts.disarm()  # before the handlers below: nothing may raise in them
    except KeyboardInterrupt:
        code = 130
    except SystemExit:  # pre-flight's (2), Hydra's on an error (1)
        if not interrupts.received:
            interrupts.close(0)  # nothing to report: Hydra or pre-flight said why
            raise
        code = 130  # it came while pre-flight or Hydra finished: an interrupted sweep all the same
    except BaseException:  # an error of the sweep's own goes on up, with SIGINT's handler put back
        interrupts.close(0)
        raise
    return interrupts.close(code)


if __name__ == "__main__":
    from vcast.frozen_heap import freeze_heap

    freeze_heap()  # the imports' objects: the planner's compositions and the exit no longer walk them
    status = run(sys.argv[1:])
    freeze_heap()
    raise SystemExit(status)
