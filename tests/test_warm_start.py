"""Warm start (vcast.sweep.warm_start): a one-process cell forked from a server that imported lmms-eval
once writes what the same cell started as a new process writes; a run killed by its timeout, and a
server that died, cost the cell nothing more than a cold start would; a standing server
(VCAST_WARM_SERVER) serves only the sweeps it can, and the others start their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

pytest.importorskip("lmms_eval")

from tests.test_sweep import tiny_spec  # noqa: E402
from tests.support.cell_files import read_cell  # noqa: E402
from vcast.sweep.execute import run_cell  # noqa: E402
from vcast.eval.warm_server import mismatch  # noqa: E402
from vcast.sweep.warm_start import ENV, WARM_STARTS, warm_start_wanted  # noqa: E402


def _samples(cell: Path) -> list[dict]:
    [samples] = read_cell(cell)["samples_files"]
    return [json.loads(line) for line in (cell / samples).read_text(encoding="utf-8").splitlines()]


def _kept(cell: Path) -> list[dict]:
    return [json.loads(line) for line in (cell / "kept" / "rank0.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_a_warm_cell_writes_what_a_cold_one_writes(tiny_dirs: dict, synth_data: Path, tmp_path: Path,
                                                   standing_warm_server: Optional[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Forked from the session's standing server where there is one (a sweep's own server forks each
    run by the same code, ``vcast.eval.warm_server.become_run``)."""
    monkeypatch.setenv(ENV, "1")
    spec = tiny_spec(tiny_dirs, method="vcast")
    warm = run_cell(spec, tmp_path / "warm")
    if standing_warm_server is not None:
        assert WARM_STARTS.server is not None and WARM_STARTS.server.address == standing_warm_server
    cold = run_cell(spec, tmp_path / "cold", env={**os.environ, ENV: "0"})  # an environment of its own: cold
    assert (warm.status, warm.warm_start) == ("ok", True), warm.log_tail
    assert (cold.status, cold.warm_start) == ("ok", False), cold.log_tail
    warm_cell, cold_cell = (tmp_path / root / spec.relative_dir for root in ("warm", "cold"))
    assert warm.scores == cold.scores
    assert _samples(warm_cell) == _samples(cold_cell)  # the answers, prompts and arguments, byte for byte as JSON
    assert _kept(warm_cell) == _kept(cold_cell)
    for key in ("items", "mean_video_tokens_kept", "mean_video_tokens_total"):
        assert getattr(warm.efficiency, key) == getattr(cold.efficiency, key), key


@pytest.mark.slow
def test_a_timed_out_run_or_a_dead_server_costs_the_cell_no_more_than_a_cold_start(
        tiny_dirs: dict, synth_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the session's standing server, its handler of this process is what dies (a sweep's own
    server: the server)."""
    monkeypatch.setenv(ENV, "1")
    spec = tiny_spec(tiny_dirs, method="uniform", limit=1)
    record = run_cell(spec, tmp_path / "a", timeout_s=0.5)
    assert record.status == "failed" and record.warm_start and "timed out" in record.error, record
    server = WARM_STARTS.server
    assert server is not None and server.alive and server.pid is not None
    os.kill(server.pid, 0)  # the server outlived its run
    again = run_cell(spec, tmp_path / "a")
    assert (again.status, again.warm_start) == ("ok", True), again.log_tail
    assert WARM_STARTS.server is server
    os.kill(server.pid, signal.SIGKILL)  # killed between two cells (out of memory, a stray kill)
    if server.process is not None:
        server.process.wait()
    cold = run_cell(spec, tmp_path / "b")
    assert (cold.status, cold.warm_start) == ("ok", False), cold.log_tail
    warm = run_cell(spec, tmp_path / "c")  # the next cell gets a new server
    assert (warm.status, warm.warm_start) == ("ok", True), warm.log_tail
    assert WARM_STARTS.server is not server


@pytest.mark.parametrize("value, visible, wanted", [
    ("0", "", False), ("1", "0", True), ("auto", "", True), ("off", "", False), ("On", "", True)])
def test_the_setting(value: str, visible: str, wanted: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)  # "": no GPU is visible, whatever the machine has
    assert warm_start_wanted() is wanted


def test_a_server_that_cannot_start_is_said_once_and_the_cells_start_cold(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    from vcast.sweep.warm_start import WarmStarts

    monkeypatch.setenv(ENV, "1")
    starts = WarmStarts()
    command = [str(tmp_path / "no-python"), "-m", "vcast.eval.run", "--help"]
    with caplog.at_level("WARNING", logger="vcast.sweep"):
        assert starts.start(command, tmp_path) is None
        assert starts.start(command, tmp_path) is None  # not tried again for the same environment
    said = [record.getMessage() for record in caplog.records if "could not start" in record.getMessage()]
    assert len(said) == 1 and "no-python" in said[0], said
    assert starts.start(["python", "-m", "other.module"], tmp_path) is None  # only vcast.eval.run starts warm


def test_a_standing_server_serves_only_the_sweeps_it_can(standing_warm_server: Optional[str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Another python, or a sweep in another session (whose process group its runs cannot join), is
    told why, and the sweep starts its own server (here none can start: the cell starts cold)."""
    from vcast.eval.warm_server import import_time_env
    from vcast.sweep.warm_start import WarmServer, WarmStarts

    if standing_warm_server is None:
        pytest.skip("no standing server in this session")
    monkeypatch.setenv(ENV, "1")
    starts = WarmStarts()
    command = [str(tmp_path / "no-python"), "-m", "vcast.eval.run", "--help"]
    with caplog.at_level("INFO", logger="vcast.sweep"):
        assert starts.start(command, tmp_path) is None
    said = [record.getMessage() for record in caplog.records]
    assert any("cannot serve this sweep: it runs " in line and "no-python" in line for line in said), said
    assert any("could not start" in line for line in said), said  # then its own: none here

    script = ("import os, sys; from vcast.eval.warm_server import import_time_env; "
              "from vcast.sweep.warm_start import WarmServer; "
              "print(WarmServer.connect(sys.argv[1], sys.executable, import_time_env(os.environ)).wait_ready())")
    for new_session in (False, True):
        done = subprocess.run([sys.executable, "-c", script, standing_warm_server], capture_output=True, text=True,
                              timeout=120, start_new_session=new_session, env=dict(os.environ))
        assert done.returncode == 0, done.stderr[-2000:]
        if new_session:
            assert "cannot join the sweep's process group" in done.stdout and "another session" in done.stdout
        else:
            assert done.stdout.strip() == "None", done.stdout  # served: its runs would join its group
    server = WarmServer.connect(standing_warm_server, sys.executable, import_time_env(os.environ))
    assert server.wait_ready() is None
    server.close()


def test_the_environment_a_server_compares() -> None:
    """Equal, or differing only where the server's imports set a variable (either value is the same
    environment); another value or another python is named."""
    python = "/usr/bin/python3"
    before, after = {"A": "1", "B": "2"}, {"A": "1", "B": "2", "SET_BY_AN_IMPORT": "x"}
    for theirs in (before, after):
        assert mismatch({"python": python, "env": dict(theirs)}, python, before, after) is None
    assert "differs from the server's in A, C" in mismatch(
        {"python": python, "env": {"A": "0", "B": "2", "C": ""}}, python, before, after)
    assert "in SET_BY_AN_IMPORT" in mismatch({"python": python, "env": {**after, "SET_BY_AN_IMPORT": "y"}},
                                             python, before, after)
    assert "it runs /usr/bin/python3, the sweep /other" in mismatch({"python": "/other", "env": before},
                                                                    python, before, after)
