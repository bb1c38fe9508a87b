"""Feedback while a sweep runs: n/N with an ETA, lmms-eval's bars relayed to the console, a one-line
Ctrl-C, and ``status`` listing pending, running, interrupted and partial cells (default root)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("hydra")

from vcast.sweep.progress import progress_line, start_progress  # noqa: E402
from vcast.sweep.progress_relay import ProgressRelay  # noqa: E402
from vcast.sweep.slurm_job import job_name, rename_slurm_job  # noqa: E402
from vcast.sweep.status import main as status_main  # noqa: E402
from vcast.sweep.summary import record_outcome  # noqa: E402

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
    cell = root / name
    (cell / "lmms_eval").mkdir(parents=True)
    (cell / "lmms_eval" / "r_results.json").write_text("{}")
    (cell / "cell.json").write_text(json.dumps({"status": status, "spec": {"limit": limit},
                                                "results_file": "lmms_eval/r_results.json"}))
    if status == "ok":
        (cell / "DONE").write_text("x")
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


@pytest.mark.slow
def test_ctrl_c_prints_one_line_and_leaves_an_interrupted_cell(tiny_dirs: dict, synth_data: Path,
                                                               tmp_path: Path) -> None:
    results = tmp_path / "results"
    command = [sys.executable, "-m", "vcast.sweep", f"results_root={results}", "model=tiny_qwen3vl",
               f"model.pretrained={tiny_dirs['qwen3_vl']}", "task=vcast_synth", "method=vcast,fastv", "frames=8",
               "limit=2", "-m"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)
    deadline = time.monotonic() + 240
    while not any(results.glob("adhoc/*/*/*/*/.vcast_synth.staging-*")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("interrupted: finished cells are kept")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    run = subprocess.run([sys.executable, "-m", "vcast.sweep.status", str(results)], capture_output=True, text=True)
    assert "adhoc/tiny_qwen3vl/8f/vcast/r0.25/vcast_synth  interrupted" in run.stdout
    assert "fastv/r0.25/vcast_synth  pending" in run.stdout  # the plan names the cell that never started
