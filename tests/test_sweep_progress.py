"""Feedback while a sweep runs: n/N with an ETA, lmms-eval's bars relayed to the console, a one-line
Ctrl-C, and ``status`` listing pending, running, interrupted and partial cells (default root)."""

from __future__ import annotations

import atexit
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import pytest

pytest.importorskip("hydra")

from vcast.results.layout import DONE_FILE  # noqa: E402
from vcast.sweep.progress import progress_line, start_progress  # noqa: E402
from vcast.sweep.progress_relay import ProgressRelay  # noqa: E402
from vcast.sweep.slurm_job import ignore_time_limit_signal, job_name, rename_slurm_job  # noqa: E402
from vcast.sweep.status import main as status_main  # noqa: E402
from vcast.sweep.summary import SweepSummary, record_outcome  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_progress_counts_cells_and_estimates_from_those_that_ran(tmp_path: Path) -> None:
    start_progress(tmp_path, total=4, finished=1, cells=["a", "b", "c", "d"], now=1000.0)
    record_outcome(tmp_path, {"cell": "a", "status": "skipped"})
    assert progress_line(tmp_path, {"cell": "a", "status": "skipped"}, now=1001.0) == \
        "[1/4] a: skipped | elapsed 1s, ETA ?"
    record_outcome(tmp_path, {"cell": "b", "status": "ok"})
    # 3 cells to run, 1 ran in 100 s -> 2 more: 200 s.
    assert progress_line(tmp_path, {"cell": "b", "status": "ok"}, now=1100.0) == \
        "[2/4] b: ok | elapsed 1m40s, ETA 3m20s"
    for cell in ("c", "d"):
        record_outcome(tmp_path, {"cell": cell, "status": "failed"})
    last = progress_line(tmp_path, {"cell": "d", "status": "failed"}, now=7400.0)
    assert last.endswith("elapsed 1h46m, ETA done")  # 6400 s
    assert progress_line(tmp_path / "single", {"cell": "x", "status": "ok"}) is None


def test_the_relay_shows_tqdm_bars_only(tmp_path: Path) -> None:
    from tqdm import tqdm

    produced = io.StringIO()
    produced.write("INFO loading the model\n")
    for _ in tqdm(range(3), desc="Model Responding", file=produced, mininterval=0, ascii=True):
        pass
    produced.write("WARNING something else\n")
    raw = produced.getvalue().encode()
    console = io.StringIO()
    relay = ProgressRelay(console, prefix="cell: ")
    for start in range(0, len(raw), 7):  # chunks that cut lines anywhere
        relay.feed(raw[start:start + 7])
    relay.close()
    shown = console.getvalue()
    assert "loading the model" not in shown and "something else" not in shown
    bars = shown.split("\r")[1:]
    assert len(bars) >= 4 and all(bar.startswith("cell: Model Responding:") for bar in bars)  # 0/3 .. 3/3
    assert shown.endswith("\n")
    last = bars[-1]
    assert last.startswith("cell: Model Responding: 100%|") and "3/3" in last
    quiet = ProgressRelay(None)
    quiet.feed(raw)
    quiet.close()  # nothing to write to: nothing happens


def _cell(root: Path, name: str, status: str = "ok", limit: float | None = None) -> Path:
    from vcast.results.record import CellRecord, write_record
    from vcast.sweep.cell import CellSpec

    cell = root / name
    (cell / "lmms_eval").mkdir(parents=True)
    (cell / "lmms_eval" / "r_results.json").write_text("{}")
    experiment, model, frames, method, ratio, task = name.split("/")
    spec = CellSpec(experiment=experiment, model=model, plugin="p", pretrained="p", prompt_key="p", model_args={},
                    method=method, method_id=method, method_params={}, ratio=float(ratio[1:]),
                    frames=int(frames[:-1]), task=task, lmms_tasks=[task], limit=limit)
    write_record(cell, CellRecord(cell=name, status=status, spec=spec, attempt=1,
                                  results_file="lmms_eval/r_results.json"))
    return cell


def _hold_lock(lock: Path) -> subprocess.Popen:
    """A separate process holding the cell's lock, as a running job does (POSIX locks are per process)."""
    code = ("import fcntl, sys, time; h = open(sys.argv[1], 'a+'); fcntl.lockf(h, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_status_lists_every_kind_of_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    _cell(results, "exp/m/8f/vcast/r0.25/t")
    _cell(results, "exp/m/8f/fastv/r0.25/t", limit=2)
    _cell(results, "exp/m/8f/random/r0.25/t", status="failed")
    (results / "exp/m/8f/uniform/r0.25/.t.staging-1234").mkdir(parents=True)      # killed
    (results / "exp/m/8f/vidcom2/r0.25/.t.staging-5678").mkdir(parents=True)      # running
    start_progress(results / ".hydra" / "sweep" / "20260101_000000", total=6, finished=0,
                   cells=["exp/m/8f/vcast/r0.25/t", "exp/m/8f/holitom/r0.25/t"])
    holder = _hold_lock(results / "exp/m/8f/vidcom2/r0.25/.t.lock")
    try:
        monkeypatch.chdir(tmp_path)
        assert status_main([]) == 0  # the default root: ./results
    finally:
        holder.kill()
        holder.wait()
    out = capsys.readouterr().out
    statuses = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:] if line.startswith("exp/")}
    assert statuses == {"exp/m/8f/vcast/r0.25/t": "ok", "exp/m/8f/fastv/r0.25/t": "partial",
                        "exp/m/8f/random/r0.25/t": "failed", "exp/m/8f/uniform/r0.25/t": "interrupted",
                        "exp/m/8f/vidcom2/r0.25/t": "running", "exp/m/8f/holitom/r0.25/t": "pending"}
    assert ("6 cell(s): 1 failed, 1 interrupted, 1 ok, 1 partial, 1 pending, 1 running; 1 not ok" in out)
    assert status_main([str(results / "exp")]) == 0  # one experiment's folder: the plan's cells still apply
    assert "m/8f/holitom/r0.25/t  pending" in capsys.readouterr().out


def test_status_without_results_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        status_main([])


def test_slurm_names_and_no_rename_outside_a_submitted_job(monkeypatch: pytest.MonkeyPatch) -> None:
    assert job_name("demo/tiny/16f/vcast/r0.25/vcast synth") == "vcast:demo/tiny/16f/vcast/r0.25/vcast_synth"
    monkeypatch.setenv("SLURM_JOB_ID", "123")
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    assert rename_slurm_job("x") is None  # e.g. a sweep run by hand inside an allocation: left alone
    assert ignore_time_limit_signal() is None  # ... and its signals are the user's


# A process of a finished job that keeps getting the time-limit signal while it returns and shuts down,
# as a job does whose cell ends in the seconds before SLURM's time-limit check. The handler stands for
# submitit's (Python code, which Python's shutdown resets to the signal's default: death, exit 140).
_SIGNALLED_TO_THE_END = """
import os, signal, subprocess, sys, time
from vcast.sweep.slurm_job import ignore_time_limit_signal
signal.signal(signal.SIGUSR1, lambda signum, frame: None)
signal.signal(signal.SIGUSR2, lambda signum, frame: None)
print(ignore_time_limit_signal().name)
# the sender stops when the signal cannot be sent (the process is gone) or after 10 s
subprocess.Popen(["bash", "-c", f"while [ $SECONDS -lt 10 ] && kill -{sys.argv[1]} {os.getpid()}; do :; done"],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.3)
"""


@pytest.mark.parametrize("configured, sent", [(None, "USR2"), ("USR1", "USR1")])
def test_a_settled_job_survives_the_time_limit_signal_through_its_shutdown(configured: Optional[str], sent: str
                                                                          ) -> None:
    env = {**os.environ, "SLURM_JOB_ID": "123", "SUBMITIT_EXECUTOR": "slurm", "PYTHONPATH": str(ROOT)}
    env.pop("SUBMITIT_PREEMPT_SIGNAL", None)
    if configured:
        env["SUBMITIT_PREEMPT_SIGNAL"] = configured  # submitit's variable for another signal
    done = subprocess.run([sys.executable, "-c", _SIGNALLED_TO_THE_END, sent], env=env, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, f"SIG{sent}"), done.stderr


# Ctrl-C. Every sweep below is started with SIGINT's default disposition (_default_sigint): a shell
# without job control starts background commands with SIGINT ignored, exec keeps that, and a sweep
# that inherited it would never see the test's SIGINT (it keeps ignoring it on purpose: see
# vcast/sweep/__main__.py). The interrupts land where the sweep prints a marker line, never after a sleep.

PAUSE_S = 120.0  # how long a paused sweep waits for the test's SIGINT before it goes on
PAUSE_AT, PAUSE_RESUME = "VCAST_TEST_PAUSE_AT", "VCAST_TEST_PAUSE_RESUME"
PAUSING = "hydra.callbacks.summary._target_=tests.test_sweep_progress.PauseForCtrlC"
INTERRUPTED_LINE = "interrupted: finished cells are kept"


def _default_sigint() -> None:
    """preexec_fn of the sweeps: SIGINT as Ctrl-C finds it in a terminal, whatever pytest inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignored_sigint() -> None:
    """preexec_fn: SIGINT ignored, as ``sweep &`` from a script starts it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class PauseForCtrlC(SweepSummary):
    """The sweep's summary callback that also pauses at the moments in ``at``: ``start`` (after
    pre-flight and the plan, as the first job starts, before its cell), ``job_end`` (after the first cell, before the second),
    ``summary`` (after the summary's lines), ``exit`` (in an atexit callback: Python shutting down).
    It prints ``paused: <moment>`` and waits there for the test's SIGINT (or for the file ``resume``).
    The sweep subprocess loads it with :func:`_pausing`'s override and environment (the moments are
    not overrides: the sweep refuses keys that its own code does not read)."""

    def __init__(self) -> None:
        self.at = set(os.environ.get(PAUSE_AT, "").split(","))
        self.resume = os.environ.get(PAUSE_RESUME)
        self.jobs = 0
        if "exit" in self.at:
            atexit.register(self.pause, "exit")

    def pause(self, moment: str) -> None:
        print(f"paused: {moment}", flush=True)
        deadline = time.monotonic() + PAUSE_S
        while time.monotonic() < deadline and not (self.resume and Path(self.resume).exists()):
            time.sleep(0.05)  # the SIGINT lands here

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        if "start" in self.at and self.jobs == 0:  # the sweeper has run pre-flight and written its plan
            self.pause("start")

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        self.jobs += 1
        if "job_end" in self.at and self.jobs == 1:
            self.pause("job_end")

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        super().on_multirun_end(config, **kwargs)
        if "summary" in self.at:
            self.pause("summary")


def _pausing(*moments: str, resume: Optional[Path] = None) -> dict[str, str]:
    """The environment that makes a sweep run with ``PAUSING`` pause at ``moments`` (see PauseForCtrlC)."""
    return {PAUSE_AT: ",".join(moments), **({PAUSE_RESUME: str(resume)} if resume else {})}


def _interrupt_sweep(args: list[str], markers: Sequence[str], stderr_path: Path, pause: Optional[dict] = None,
                     preexec: Callable[[], None] = _default_sigint,
                     on_signal: Callable[[], None] = lambda: None) -> tuple[int, str, str]:
    """Run ``python -m vcast.sweep <args> -m`` (paused as ``pause`` says: see :func:`_pausing`) and send
    SIGINT to its process group (what Ctrl-C does) each time it prints the next of ``markers``; its
    exit code, stdout and stderr."""
    left = list(markers)
    lines = []
    with stderr_path.open("w") as stderr:  # a file: nothing blocks on a full pipe while stdout is read
        process = subprocess.Popen([sys.executable, "-m", "vcast.sweep", *args, *([PAUSING] if pause else []), "-m"],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                   env={**os.environ, "HF_HUB_OFFLINE": "1", **(pause or {})},
                                   process_group=0, preexec_fn=preexec)  # its own group, as a shell's job
        for line in process.stdout:
            lines.append(line)
            if left and left[0] in line:
                left.pop(0)
                os.killpg(process.pid, signal.SIGINT)
                on_signal()
        process.wait(timeout=PAUSE_S)
    out = "".join(lines)
    assert not left, f"the sweep never printed {left[0]!r} (exit code {process.returncode}):\n{out[-3000:]}"
    return process.returncode, out, stderr_path.read_text()


def _assert_ended_by_ctrl_c(code: int, out: str, err: str) -> None:
    assert code == 130, f"exit code {code}\n{out[-2000:]}\n{err[-3000:]}"
    said = [line for line in err.splitlines() if "interrupted" in line.lower()]
    assert len(said) == 1 and said[0].startswith(INTERRUPTED_LINE), err[-3000:]
    for word in ("Traceback", "Exception ignored", "KeyboardInterrupt"):
        assert word not in err, err[-3000:]


def _statuses(results: Path) -> dict[str, str]:
    """``status``'s word for each cell of the test grid, by method."""
    run = subprocess.run([sys.executable, "-m", "vcast.sweep.status", str(results)], capture_output=True, text=True)
    return {line.split()[0].split("/")[3]: line.split()[1] for line in run.stdout.splitlines()
            if line.startswith("adhoc/")}


@pytest.mark.slow
def test_ctrl_c_at_any_moment_prints_one_line_exits_130_and_keeps_finished_cells(tiny_dirs: dict, synth_data: Path,
                                                                                 tmp_path: Path) -> None:
    results = tmp_path / "results"
    grid = [f"results_root={results}", "model=tiny_qwen3vl", f"model.pretrained={tiny_dirs['qwen3_vl']}",
            "task=vcast_synth", "method=vanilla,random", "frames=8", "limit=2"]
    vanilla_done = results / "adhoc/tiny_qwen3vl/8f/vanilla/r1/vcast_synth" / DONE_FILE
    # One results folder throughout: each sweep resumes the last one. (moment, pause, marker, statuses after)
    moments = [("before the first cell", ["start"], "paused: start", {"vanilla": "pending", "random": "pending"}),
               ("inside a cell", [], "vanilla/r1/vcast_synth: running (attempt 1)",
                {"vanilla": "interrupted", "random": "pending"}),
               ("between two cells", ["job_end"], "paused: job_end", {"vanilla": "partial", "random": "pending"}),
               ("during the summary", ["summary"], "paused: summary", {"vanilla": "partial", "random": "partial"})]
    for moment, pause, marker, statuses in moments:
        finished = vanilla_done.stat().st_mtime_ns if vanilla_done.exists() else None
        code, out, err = _interrupt_sweep(grid, [marker], tmp_path / f"{pause[0] if pause else 'cell'}.err",
                                          pause=_pausing(*pause) if pause else None)
        _assert_ended_by_ctrl_c(code, out, err)
        assert _statuses(results) == statuses, moment
        if finished is not None:  # a finished cell is skipped, not redone, and survives the interrupt
            assert vanilla_done.stat().st_mtime_ns == finished, moment
    assert "sweep done: 2 cell(s): 1 ok, 1 skipped" in out  # the last sweep's summary was out when Ctrl-C came


@pytest.mark.parametrize("first", ["start", "exit"])
def test_ctrl_c_while_python_shuts_down_exits_130_without_a_traceback(first: str, tmp_path: Path) -> None:
    """A Ctrl-C that falls in an atexit callback (logging's, torch's, wandb's...): the second one,
    after the sweep's line (a wrapper that forwards Ctrl-C to its child sends two), or the first
    one, after a sweep that ended by itself (here pre-flight stops it: no checkpoint)."""
    args = [f"results_root={tmp_path / 'results'}", "model=tiny_qwen3vl", f"model.pretrained={tmp_path / 'gone'}",
            "task=vcast_synth", "method=vanilla"]
    if first == "start":  # no cell runs: it is interrupted before the first
        args.append("preflight=false")
    moments = ["start", "exit"] if first == "start" else ["exit"]
    _assert_ended_by_ctrl_c(*_interrupt_sweep(args, [f"paused: {moment}" for moment in moments],
                                              tmp_path / "sweep.err", pause=_pausing(*moments)))


def test_a_sweep_started_with_sigint_ignored_keeps_ignoring_it(tmp_path: Path) -> None:
    """``sweep &`` from a script: the shell meant the terminal's Ctrl-C not to reach it (module docstring)."""
    resume = tmp_path / "resume"
    args = [f"results_root={tmp_path / 'results'}", "model=tiny_qwen3vl", f"model.pretrained={tmp_path / 'gone'}",
            "task=vcast_synth", "method=vanilla"]
    code, _, err = _interrupt_sweep(args, ["paused: exit"], tmp_path / "sweep.err",
                                    pause=_pausing("exit", resume=resume), preexec=_ignored_sigint,
                                    on_signal=resume.touch)  # kill(2) has returned: the SIGINT is gone
    assert code == 2, err[-3000:]  # pre-flight's own exit: the SIGINT changed nothing
    assert "interrupted" not in err and "Traceback" not in err and "KeyboardInterrupt" not in err


CONFIG_CODE = """
import signal, sys, time
import vcast.sweep.__main__ as sweep

omegaconf_code = {"__name__": "omegaconf.half_done", "signal": signal}  # a function as OmegaConf's own
exec("def update():\\n    signal.raise_signal(signal.SIGINT)\\n    print('config whole again', flush=True)\\n",
     omegaconf_code)

def main():
    omegaconf_code["update"]()
    while True:
        time.sleep(0.01)  # the interrupt comes here, out of OmegaConf

sweep.main = main
sys.exit(sweep.run([]))
"""


def test_an_interrupt_inside_hydra_or_omegaconf_waits_until_they_are_done() -> None:
    """A KeyboardInterrupt raised half-way through an OmegaConf update leaves the config broken; the
    cleanup then fails with another error (an AttributeError traceback, exit 1)."""
    run = subprocess.run([sys.executable, "-c", CONFIG_CODE], cwd=ROOT, capture_output=True, text=True, timeout=PAUSE_S,
                         preexec_fn=_default_sigint)
    assert run.stdout.splitlines() == ["config whole again"], run.stdout + run.stderr[-3000:]
    _assert_ended_by_ctrl_c(run.returncode, run.stdout, run.stderr)


def test_a_ctrl_c_held_back_while_a_cell_starts_interrupts_the_cell_instead_of_failing_it(tmp_path: Path) -> None:
    """A Ctrl-C that lands while the sweep starts a cell's lmms-eval child is held back (Interrupts
    waits out subprocess's _execute_child), and the child, in the same process group, can die of it
    before the handler's retry. The runner raises the held interrupt once the child has started or
    ended, so the cell is left interrupted, never recorded as a failed run (seen in a CI run)."""
    from vcast.sweep.__main__ import Interrupts
    from vcast.sweep.execute import _run_subprocess
    from vcast.sweep.progress_relay import ProgressRelay

    previous = signal.getsignal(signal.SIGINT)
    handler = Interrupts(previous=previous)
    signal.signal(signal.SIGINT, handler)  # set here: whatever disposition pytest inherited
    try:
        handler.armed, handler.received = True, True  # a SIGINT came and is waiting to be raised
        with pytest.raises(KeyboardInterrupt):
            _run_subprocess([sys.executable, "-c", "raise SystemExit(1)"], tmp_path / "run.log", None, None,
                            ProgressRelay(None))
        assert not handler.armed  # raised once: a later retry of the same SIGINT raises nothing
    finally:
        signal.signal(signal.SIGINT, previous)
