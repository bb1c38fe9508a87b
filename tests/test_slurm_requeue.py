"""A cell longer than its SLURM job's time limit finishes over several requeues, on a real
single-node SLURM cluster (skipped, with the reason, where SLURM cannot start).

A one-cell sweep through Hydra's submitit launcher (``hydra/launcher=slurm_h100``) with a 1-minute
time limit: SLURM sends USR2 before the limit (``--signal=USR2@<signal_delay_s>``), submitit's
handler requeues the job (``scontrol requeue``: same job id, ``Restarts`` + 1), and each attempt
resumes the cell from the answers its response cache holds. The tiny model answers its 12 items in
a few seconds, so each answer of the lmms-eval child is slowed down (``VCAST_SLOW_ANSWER_S``,
``tests/support/kill_points``): run in one go, the cell would take ~70 s (~8 s of start-up, then
12 answers of 5 s), longer than the job's limit. The finished cell must equal an uninterrupted run.

Timing (measured with slurm-wlm 22.05 on this cluster). slurmctld checks time limits every 30 s
and sends the signal at the first check where less than ``signal_delay_s`` + 30 s are left, so with
a 60 s limit and ``signal_delay_s=5`` every attempt runs 25-55 s (where in the 30 s cycle its job
starts decides). An attempt's first answer is in the cache ~8 s after its job starts (job step,
Python, lmms-eval, model; the slow-down comes after the answer is journaled), then one every 5 s:
3-10 answers an attempt, so 2 to 4 attempts, and never one (the 12th answer cannot exist before
~63 s). A requeued job waits for its launch credential to expire before it may start again
(AuthInfo ``cred_expire``, 120 s by default, then the next backfill tick, 30 s apart by default:
~150 s a requeue); the suite's cluster sets them to 10 s and 1 s (~11 s a requeue). The whole test
takes about 2 minutes on 2 CPU cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from itertools import pairwise
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
pytest.importorskip("lmms_eval")

from tests.test_sweep import ROOT, finish, sweep  # noqa: E402
from tests.support.cell_files import is_complete, read_cell  # noqa: E402
from vcast.sweep.cell import CellSpec  # noqa: E402
from vcast.sweep.execute import run_cell  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.requeue]

ITEMS = 12  # the whole synthetic benchmark (limit=null)
TIME_LIMIT_MIN = 1
SIGNAL_DELAY_S = 5
SLOW_ANSWER_S = 5
KILL_POINTS = ROOT / "tests" / "support" / "kill_points"
CELL = Path("adhoc/tiny_qwen3vl/8f/vcast/r0.25/vcast_synth")
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                "DEADLINE", "PREEMPTED")


def _samples_text(cell: Path) -> list[str]:
    """The cell's samples file, line by line, in doc order (as tests/test_resume.py compares them)."""
    [samples] = read_cell(cell)["samples_files"]
    lines = (cell / samples).read_text(encoding="utf-8").splitlines()
    return sorted(lines, key=lambda line: json.loads(line)["doc_id"])


def _job_fields(job_id: str) -> dict[str, str]:
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True,
                           check=False).stdout
    return dict(word.split("=", 1) for word in shown.split() if "=" in word)


def _final_job_fields(job_id: str, timeout_s: float = 120) -> dict[str, str]:
    """The job's fields once it has ended (the sweep sees its result before its process exits)."""
    deadline = time.monotonic() + timeout_s
    while (fields := _job_fields(job_id)).get("JobState") not in FINAL_STATES:
        assert time.monotonic() < deadline, f"job {job_id} still {fields.get('JobState')} after {timeout_s} s"
        time.sleep(0.5)
    return fields


def _submitit_logs(results: Path) -> str:
    """The tails of the job's submitit logs (stdout and stderr of every attempt), for failures."""
    parts = []
    for path in sorted(results.glob(".hydra/sweep/*/.submitit/*/*_log.*")):
        parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}")
    return "\n".join(parts)


def test_cell_longer_than_the_time_limit_finishes_over_requeues(slurm_cluster, tiny_dirs: dict, synth_data: Path,
                                                               tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    for key in [k for k in os.environ if k.startswith("SLURM_") and k != "SLURM_CONF"]:
        monkeypatch.delenv(key)
    # sbatch exports the submitting environment (the sweep's) to the job, and the job's sweep to lmms-eval.
    monkeypatch.setenv("VCAST_SLOW_ANSWER_S", str(SLOW_ANSWER_S))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(KILL_POINTS), os.environ.get("PYTHONPATH")])))
    launcher = ["hydra/launcher=slurm_h100", f"hydra.launcher.partition={slurm_cluster.partition}",
                "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2",
                f"hydra.launcher.timeout_min={TIME_LIMIT_MIN}", f"hydra.launcher.signal_delay_s={SIGNAL_DELAY_S}"]
    results = tmp_path / "results"
    start = time.monotonic()
    output = finish(sweep(["task=vcast_synth", "method=vcast", "ratio=0.25", "limit=null", *launcher, "-m"], results,
                          tiny_dirs), timeout=900)
    swept_s = time.monotonic() - start
    cell = results / CELL
    record = read_cell(cell) or {}
    logs = f"{output[-3000:]}\n{_submitit_logs(results)}"
    assert is_complete(cell) and record["status"] == "ok", logs
    assert record["spec"]["limit"] is None and record["efficiency"]["items"] == ITEMS

    # Several attempts of one SLURM job (a requeue keeps the job id), each resuming where the last stopped.
    attempts = record["attempts"]
    summary = [(e["attempt"], e["answered_before"], e["computed"], e["slurm_job_id"]) for e in attempts]
    assert len(attempts) >= 2, (summary, logs)
    assert [e["attempt"] for e in attempts] == list(range(1, len(attempts) + 1)), summary
    [job_id] = {e["slurm_job_id"] for e in attempts}
    assert job_id, summary
    found = [e["answered_before"] for e in attempts]
    assert found[0] == 0 and all(a < b for a, b in pairwise(found)), summary  # each attempt answered some
    for entry, following in zip(attempts, [*attempts[1:], None]):
        found_next = ITEMS if following is None else following["answered_before"]
        assert entry["computed"] == found_next - entry["answered_before"], summary
    items = [(task, doc) for tasks in record["items_by_attempt"].values() for task, docs in tasks.items()
             for doc in docs]
    assert len(items) == len(set(items)) == ITEMS
    assert record["efficiency"]["resumed_over"] == len([e for e in attempts if e["computed"]])

    # SLURM requeued the job after each time-limit signal, and its last run completed.
    fields = _final_job_fields(job_id)
    ended = {key: fields.get(key) for key in ("JobState", "Reason", "ExitCode", "DerivedExitCode", "Restarts")}
    assert fields["JobState"] == "COMPLETED", (ended, logs)  # FAILED: the process died (ExitCode says of what)
    assert int(fields["Restarts"]) in (len(attempts) - 1, len(attempts)), (fields["Restarts"], summary)
    assert "DUE TO JOB REQUEUE" in _submitit_logs(results)

    # The same answers and scores as the cell run once, uninterrupted and not slowed down.
    env = {key: value for key, value in os.environ.items() if key != "VCAST_SLOW_ANSWER_S"}
    reference = run_cell(CellSpec(**record["spec"]), tmp_path / "reference", env={**env, "HF_HUB_OFFLINE": "1"})
    assert reference.status == "ok" and len(reference.attempts) == 1, reference.log_tail
    assert _samples_text(cell) == _samples_text(tmp_path / "reference" / CELL)
    assert record["scores"] == reference.scores
    print(f"swept in {swept_s:.0f} s over {len(attempts)} attempts: {summary}")
