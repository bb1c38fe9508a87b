"""A failure says why where the user looks: the sweep's summary and `status` carry the error, not
only an exit code; pre-flight refuses what it knows before lmms-eval starts; each candidate path
is named once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from vcast.sweep.environment import REPO, pretrained_problem

CHAINED = """INFO lmms-eval starting
Traceback (most recent call last):
  File "x.py", line 1, in <module>
    load()
KeyError: 'model_type'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "x.py", line 3, in <module>
    raise ValueError("vcast_qwen3_vl: /c is a 'llava_onevision' checkpoint")
ValueError: vcast_qwen3_vl: /c is a 'llava_onevision' checkpoint
[rank0]: some shutdown noise
"""


def test_failure_cause_is_the_last_tracebacks_exception() -> None:
    from vcast.sweep.execute import failure_cause

    assert failure_cause(CHAINED) == "ValueError: vcast_qwen3_vl: /c is a 'llava_onevision' checkpoint"
    assert failure_cause("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB") == (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB")
    assert failure_cause("loading...\nKilled\n") is None


def _sweep(results: Path, tiny_dirs: dict, *words: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "vcast.sweep", f"results_root={results}", "model=tiny_qwen3vl",
               "task=vcast_synth", "limit=2", *words]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


def _status(results: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "vcast.sweep.status", str(results)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_too_few_frames_are_refused_before_lmms_eval_starts(tmp_path: Path, tiny_dirs: dict, synth_data: Path) -> None:
    """frames=1 used to start lmms-eval and fail 16 s later with only "exited with code 1"."""
    done = _sweep(tmp_path, tiny_dirs, f"model.pretrained={tiny_dirs['qwen3_vl']}", "method=vanilla", "frames=1")
    assert done.returncode == 1
    cause = "frames=1: Qwen3-VL (vcast_qwen3_vl) reads at least 2 frames"
    assert f"failed adhoc/tiny_qwen3vl/1f/vanilla/r1/vcast_synth: {cause}" in done.stdout + done.stderr
    (cell,) = [p.parent for p in tmp_path.rglob("cell.json")]
    assert not (cell / "run.log").exists()  # nothing was started
    assert f"adhoc/tiny_qwen3vl/1f/vanilla/r1/vcast_synth: failed: {cause}" in _status(tmp_path)


def test_a_failed_cell_carries_its_cause_in_the_summary_and_status(tmp_path: Path, tiny_dirs: dict,
                                                                   synth_data: Path) -> None:
    """A LLaVA checkpoint under the Qwen3-VL plugin: only the plugin can tell, after lmms-eval starts."""
    done = _sweep(tmp_path, tiny_dirs, f"model.pretrained={tiny_dirs['llava_onevision']}", "method=vanilla", "frames=8")
    assert done.returncode == 1
    cause = "is a 'llava_onevision' checkpoint; expected one of qwen3_vl, qwen3_vl_moe"
    summary = next(line for line in (done.stdout + done.stderr).splitlines() if "failed adhoc/" in line)
    assert "lmms-eval exited with code 1: ValueError: vcast_qwen3_vl: " in summary and cause in summary
    status = _status(tmp_path)
    assert "why:" in status and cause in status.split("why:")[1]


def test_a_missing_checkpoint_names_each_candidate_once(tmp_path: Path) -> None:
    inside = pretrained_problem("checkpoints/nope", cwd=REPO)
    assert inside.count(str(REPO / "checkpoints" / "nope")) == 1 and " or " not in inside.split("tried ")[1].split(")")[0]
    elsewhere = pretrained_problem("checkpoints/nope", cwd=tmp_path)
    assert f"tried {tmp_path / 'checkpoints/nope'} or {REPO / 'checkpoints/nope'})" in elsewhere
